#include "tasks/language_model_data.h"

#include "tasks/token_sources/file_globs.h"
#include "tasks/token_sources/token_id_splits.h"

namespace gcrun::tasks {
namespace {

const std::array<const char*, 3> kFileKeys = {"task.train_files", "task.validation_files", "task.test_files"};
const std::array<const char*, 3> kBinFiles = {"train.bin", "val.bin", ""};

std::array<const std::string*, 3> patternsOf(const LanguageModelOptions& settings) {
  return {&settings.train_files, &settings.validation_files, &settings.test_files};
}

bool testIsValidation(const LanguageModelOptions& settings) {
  return settings.level == "tokens" && settings.test_files.empty();
}

std::string folderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

std::string sourceOf(const std::vector<std::string>& files, size_t split, const LanguageModelOptions& settings) {
  if (files.size() == 1) return files.front();
  return "the " + std::to_string(files.size()) + " files of " + kFileKeys[split] + " '" + *patternsOf(settings)[split] +
         "'";
}

std::string withThousands(int64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string originOf(const SplitFiles& files, const std::string& dir, const LanguageModelOptions& settings) {
  size_t count = files[0].size() + files[1].size() + (testIsValidation(settings) ? 0 : files[2].size());
  std::string origin = settings.level + " level, " + std::to_string(count) + (count == 1 ? " file" : " files");
  bool globbed = false;
  for (const std::string* pattern : patternsOf(settings)) globbed = globbed || !pattern->empty();
  origin += globbed ? " (task.*_files)" : " in " + dir;
  if (testIsValidation(settings)) origin += "; the test split is the validation files (no task.test_files)";
  return origin;
}

}  // namespace

SplitFiles languageModelFiles(const std::string& dir, const LanguageModelOptions& settings) {
  const bool tokens = settings.level == "tokens";
  SplitFiles files = wikiTokenFiles(dir);
  const auto patterns = patternsOf(settings);
  for (size_t i = 0; i < files.size(); ++i) {
    if (!patterns[i]->empty()) {
      files[i] = expandFileGlob(kFileKeys[i], *patterns[i], dir);
    } else if (tokens && i < 2) {
      files[i] = {dir + "/" + kBinFiles[i]};
    }
  }
  if (testIsValidation(settings)) files[2] = files[1];
  return files;
}

std::shared_ptr<TokenSplits> readLanguageModelData(const std::string& dir, const LanguageModelOptions& settings,
                                                   int64_t given_vocabulary) {
  const SplitFiles files = languageModelFiles(dir, settings);
  auto data = std::make_shared<TokenSplits>();
  if (settings.level == "tokens") {
    const auto [vocabulary, from] = tokenVocabulary(given_vocabulary, folderOf(files[0].front()));
    TokenIdSplits splits = readTokenIdSplits(files, vocabulary);
    data->vocabulary = splits.vocabulary;
    data->ids = std::move(splits.ids);
    data->origin = std::string(splits.layouts[0]) + ", " + originOf(files, dir, settings) + "; vocabulary from " + from;
  } else {
    TokenCorpus corpus = readTokenCorpus(files, settings.level == "char" ? TokenLevel::kChar : TokenLevel::kWord);
    data->vocabulary = corpus.vocabulary;
    data->ids = std::move(corpus.ids);
    data->origin = originOf(files, dir, settings);
  }
  for (size_t i = 0; i < files.size(); ++i) data->source[i] = sourceOf(files[i], i, settings);
  return data;
}

std::string dataLine(const TokenSplits& data) {
  return "data: " + withThousands(data.ids[0].numel()) + " train / " + withThousands(data.ids[1].numel()) +
         " validation / " + withThousands(data.ids[2].numel()) + " test tokens, vocabulary " +
         withThousands(data.vocabulary) + " (" + data.origin + ")";
}

}  // namespace gcrun::tasks
