// The standalone driver for the fuzz targets in builds without libFuzzer (the
// plain gcc build and its sanitizer builds): `fuzz_X [--mutations N] [--seed S]
// PATH...` runs every file under each PATH (a file or a directory, recursively)
// through LLVMFuzzerTestOneInput, then N deterministic mutations of each
// (bit flips, byte changes, insertions, deletions, splices with another entry),
// so the corpus is a regression test and each ctest run is a short, repeatable
// smoke. A failed property aborts the process; the input is written to
// ./fuzz-replay-crash-<target> first (set SIMBA_FUZZ_ARTIFACT to change that),
// so it can become a corpus entry. See ADR 0018.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

const std::vector<uint8_t>* g_current = nullptr;
std::string g_artifact;

void on_abort(int sig) {
  if (g_current && !g_artifact.empty()) {
    if (FILE* f = std::fopen(g_artifact.c_str(), "wb")) {
      std::fwrite(g_current->data(), 1, g_current->size(), f);
      std::fclose(f);
      std::fprintf(stderr, "replay: failing input written to %s\n", g_artifact.c_str());
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void collect(const std::string& path, std::vector<std::string>* out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    out->push_back(path);
    return;
  }
  DIR* d = opendir(path.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) collect(path + "/" + n, out);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run(const std::vector<uint8_t>& input) {
  g_current = &input;
  // A copy of exactly `size` bytes, so that ASan sees any read past the end.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[input.size() ? input.size() : 1]);
  if (!input.empty()) std::memcpy(copy.get(), input.data(), input.size());
  LLVMFuzzerTestOneInput(copy.get(), input.size());
  g_current = nullptr;
}

const char* const kInteresting[] = {"%",
                                    "%0",
                                    "%zz",
                                    "@",
                                    ":",
                                    "/",
                                    "?",
                                    "&",
                                    "=",
                                    "[",
                                    "]",
                                    ",",
                                    "://",
                                    "\0",
                                    "-1",
                                    "9999999999999999999",
                                    "ms",
                                    "s",
                                    "m",
                                    "password=",
                                    "auth=digest:",
                                    "*",
                                    "$",
                                    "\r\n",
                                    "sslpassword="};

std::vector<uint8_t> mutate(std::vector<uint8_t> v, const std::vector<std::vector<uint8_t>>& all,
                            std::mt19937_64& rng) {
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!v.empty()) v[rng() % v.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // set a byte
        if (!v.empty()) v[rng() % v.size()] = static_cast<uint8_t>(rng());
        break;
      case 2: {  // insert a byte
        const size_t at = v.empty() ? 0 : rng() % (v.size() + 1);
        v.insert(v.begin() + static_cast<long>(at), static_cast<uint8_t>(rng()));
        break;
      }
      case 3:  // delete a range
        if (!v.empty()) {
          const size_t at = rng() % v.size();
          const size_t len = std::min<size_t>(v.size() - at, 1 + rng() % 8);
          v.erase(v.begin() + static_cast<long>(at), v.begin() + static_cast<long>(at + len));
        }
        break;
      case 4: {  // insert a token that matters to the parsers
        const char* t = kInteresting[rng() % (sizeof kInteresting / sizeof kInteresting[0])];
        const size_t len = std::max<size_t>(1, std::strlen(t));
        const size_t at = v.empty() ? 0 : rng() % (v.size() + 1);
        v.insert(v.begin() + static_cast<long>(at), t, t + len);
        break;
      }
      case 5: {  // splice with another entry
        const std::vector<uint8_t>& o = all[rng() % all.size()];
        const size_t cut = v.empty() ? 0 : rng() % (v.size() + 1);
        const size_t from = o.empty() ? 0 : rng() % (o.size() + 1);
        v.resize(cut);
        v.insert(v.end(), o.begin() + static_cast<long>(from), o.end());
        break;
      }
      default:  // truncate
        if (!v.empty()) v.resize(rng() % v.size());
        break;
    }
  }
  if (v.size() > 4096) v.resize(4096);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 0;
  uint64_t seed = 1;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) {
      mutations = std::strtol(argv[++i], nullptr, 10);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  const char* base = std::strrchr(argv[0], '/');
  const char* artifact = std::getenv("SIMBA_FUZZ_ARTIFACT");
  g_artifact =
      artifact ? artifact : std::string("fuzz-replay-crash-") + (base ? base + 1 : argv[0]);
  std::signal(SIGABRT, on_abort);
  std::signal(SIGSEGV, on_abort);

  std::vector<std::string> files;
  for (const std::string& p : paths) collect(p, &files);
  std::vector<std::vector<uint8_t>> inputs;
  for (const std::string& f : files) inputs.push_back(read_file(f));
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no corpus entries under the paths given\n");
    return 2;
  }
  for (const auto& in : inputs) run(in);
  run({});
  std::mt19937_64 rng(seed);
  long done = 0;
  for (long m = 0; m < mutations; ++m) {
    run(mutate(inputs[static_cast<size_t>(m) % inputs.size()], inputs, rng));
    ++done;
  }
  std::printf("replay: %zu corpus entries and %ld mutations (seed %llu) ran clean\n", inputs.size(),
              done, static_cast<unsigned long long>(seed));
  return 0;
}
