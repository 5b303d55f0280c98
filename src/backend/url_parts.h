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

}  // namespace simba

#endif
