#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gcrun::tasks {

// Debian's libsentencepiece0 carries its own copy of protobuf 3.14 with every symbol exported,
// while LibTorch loads the system's libprotobuf 3.21: linked into one program, the two resolve to
// each other's functions and the process crashes before main(). So SentencePiece is reached only
// through the module gcrun_sentencepiece (sentencepiece_module.cpp), loaded with RTLD_LOCAL and
// RTLD_DEEPBIND: its symbols, protobuf's copy included, stay its own. The module and gcrun share
// the C++ standard library, so std types cross this table.
struct SentencePieceApi {
  // A processor of the serialized model, or null with `error` set.
  void* (*load)(const std::string& serialized, std::string& error);
  void (*release)(void* processor);
  int (*pieces)(const void* processor);
  int (*end_of_sentence)(const void* processor);  // -1: none
  // Appends the pieces of `text`; false with `error` set.
  bool (*encode)(const void* processor, const std::string& text, std::vector<int>& ids, std::string& error);
  bool (*decode)(const void* processor, const std::vector<int>& ids, std::string& text, std::string& error);
  // SentencePieceTrainer::Train with `options` on the sentences `next` gives (false after the last),
  // SentencePiece's random generator seeded with `seed` first; the model into `model`, or false
  // with `error` set.
  bool (*train)(const std::unordered_map<std::string, std::string>& options, unsigned seed,
                const std::function<bool(std::string&)>& next, std::string& model, std::string& error);
};

// The module's table; a module that cannot be found or loaded is a std::runtime_error naming it
// and where gcrun looked.
const SentencePieceApi& sentencePiece();

}  // namespace gcrun::tasks

// What the module exports, by this name.
extern "C" const gcrun::tasks::SentencePieceApi* gcrun_sentencepiece_api();
