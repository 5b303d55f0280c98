// Pieces every backend's URL parser needs: percent-decoding and bounded
// decimal numbers.
#ifndef SIMBA_BACKEND_URL_PARTS_H
#define SIMBA_BACKEND_URL_PARTS_H

#include <string>

namespace simba {

// %XX decoding; false on a malformed escape.
bool percent_decode(const std::string& in, std::string* out);

// A decimal number of at most 9 digits in [lo, hi]; false otherwise.
bool parse_decimal(const std::string& s, long lo, long hi, int* out);

// Overwrites the characters of `secret` (the compiler may not skip it) and
// empties it: a parsed URL's copy of a password is not left in freed memory
// (a core dump) once the backend took what it keeps.
void wipe_secret(std::string* secret);

}  // namespace simba

#endif
