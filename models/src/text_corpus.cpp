#include "qsgd/models/data/text_corpus.hpp"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "qsgd/models/error.hpp"

namespace qsgd::models {

std::vector<std::string> default_corpus_paths() {
  const std::string dir = "/usr/share/common-licenses/";
  return {dir + "GPL-3", dir + "GPL-2", dir + "LGPL-2.1", dir + "LGPL-3",
          dir + "Apache-2.0", dir + "MPL-2.0", dir + "GFDL-1.3", dir + "Artistic"};
}

TextCorpus load_text_corpus(const std::vector<std::string>& paths, std::size_t max_bytes) {
  if (paths.empty()) throw std::invalid_argument("load_text_corpus: no files");
  TextCorpus c;
  std::vector<char> piece(1 << 16);
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw DataError(p + ": cannot open: " + std::strerror(errno));
    const std::size_t before = c.text.size();
    while (in) {
      in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
      const auto got = static_cast<std::size_t>(in.gcount());
      if (got > max_bytes - c.text.size())
        throw DataError(p + ": the corpus holds more than the limit of " + std::to_string(max_bytes) + " bytes");
      c.text.append(piece.data(), got);
    }
    if (in.bad()) throw DataError(p + ": read error");
    if (c.text.size() == before) throw DataError(p + ": empty file");
    c.sources.push_back(p);
  }
  std::array<int, 256> id{};
  id.fill(-1);
  for (unsigned char ch : c.text) id[ch] = 0;
  for (int b = 0; b < 256; ++b) {
    if (id[b] == 0) {
      id[b] = static_cast<int>(c.vocab.size());
      c.vocab.push_back(static_cast<std::uint8_t>(b));
    }
  }
  c.tokens.reserve(c.text.size());
  for (unsigned char ch : c.text) c.tokens.push_back(id[ch]);
  return c;
}

TokenDataset make_token_dataset(const TextCorpus& corpus, std::size_t seq_len, double begin, double end) {
  if (seq_len == 0) throw std::invalid_argument("make_token_dataset: seq_len must be > 0");
  if (!(begin >= 0 && begin < end && end <= 1)) throw std::invalid_argument("make_token_dataset: need 0 <= begin < end <= 1");
  const auto n = static_cast<double>(corpus.tokens.size());
  const auto b = static_cast<std::size_t>(std::floor(begin * n));
  const auto e = static_cast<std::size_t>(std::floor(end * n));
  TokenDataset d;
  d.name = "text";
  d.vocab = corpus.vocab.size();
  d.seq_len = seq_len;
  d.tokens.assign(corpus.tokens.begin() + static_cast<std::ptrdiff_t>(b),
                  corpus.tokens.begin() + static_cast<std::ptrdiff_t>(e));
  return d;
}

}  // namespace qsgd::models
