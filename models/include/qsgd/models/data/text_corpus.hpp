#pragma once
// A character-level text corpus for the LSTM language model.
//
// Default corpus: the license texts that every Debian system ships in
// /usr/share/common-licenses (package base-files, priority required):
//   GPL-3, GPL-2, LGPL-2.1, LGPL-3, Apache-2.0, MPL-2.0, GFDL-1.3, Artistic
// concatenated in that order (about 150 KB of English legal prose). Tokens
// are bytes, numbered by their rank among the distinct bytes that occur
// (vocabulary sorted by byte value). A missing or empty file is a DataError
// naming it.

#include <cstdint>
#include <string>
#include <vector>

#include "qsgd/models/data/dataset.hpp"

namespace qsgd::models {

struct TextCorpus {
  std::vector<std::string> sources;  // files, in order
  std::string text;                  // their concatenation
  std::vector<std::uint8_t> vocab;   // token id -> byte
  std::vector<int> tokens;           // text as token ids
};

// Default limit on a corpus's total size: 64 MiB of text (the default corpus
// is about 0.2 MB). The text is held once as bytes and once as int tokens.
constexpr std::size_t text_corpus_default_max_bytes = std::size_t(64) << 20;

std::vector<std::string> default_corpus_paths();
// Reads the files in pieces and refuses (DataError naming the file) a corpus
// whose files hold more than max_bytes together, before reading past it.
TextCorpus load_text_corpus(const std::vector<std::string>& paths,
                            std::size_t max_bytes = text_corpus_default_max_bytes);

// Windows of seq_len (dataset.hpp) over tokens [begin, end) of the corpus,
// with begin/end given as fractions of its length (e.g. 0..0.9 for training,
// 0.9..1 for validation).
TokenDataset make_token_dataset(const TextCorpus& corpus, std::size_t seq_len, double begin = 0.0,
                                double end = 1.0);

}  // namespace qsgd::models
