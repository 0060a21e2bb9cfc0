// The README and docs/ against the gcrun they describe: the generated key table is current, every
// `gcrun` command in their sh code blocks works, and every relative link finds its page and heading.
//
// How a command is checked (`gcrun` or a path ending in /gcrun first on a line of a ```sh block):
// - every `--flag` on it must be one that its subcommand's `--help` lists;
// - `list`, `show`, `completion` and `--help` lines run as written; `experiment` lines run as
//   `gcrun show` with the same preset, --config, --set and --plugin (the resolved configuration,
//   validated, without training); `study` lines run with --dry-run (the plan, nothing trained);
//   all of them must exit 0. They run in an empty temporary folder.
// - `report`, `predict`, `bench`, `data`, `study --status` and `experiment --resume` need run
//   directories, workers or data that a test cannot have in seconds: their flags alone are checked.
// - a line whose comment says "(not run" (a file of the reader's own, an install elsewhere) has its
//   flags checked only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace {

using gcrun::testing::readFile;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
const std::string kSource = GCRUN_SOURCE_DIR;

// README.md and every page of docs/, as paths relative to the source folder.
std::vector<std::string> pages() {
  std::vector<std::string> found = {"README.md"};
  for (const auto& entry : std::filesystem::directory_iterator(kSource + "/docs")) {
    if (entry.path().extension() == ".md") found.push_back("docs/" + entry.path().filename().string());
  }
  std::sort(found.begin() + 1, found.end());
  return found;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> wordsOf(const std::string& text) {
  std::vector<std::string> words;
  std::stringstream stream(text);
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

struct DocCommand {
  std::string where;               // page:line
  std::vector<std::string> words;  // after the program
  std::string comment;
};

bool isGcrun(const std::string& word) {
  return word == "gcrun" || (word.size() > 6 && word.substr(word.size() - 6) == "/gcrun");
}

// The gcrun commands of the sh code blocks of `page`.
std::vector<DocCommand> commandsIn(const std::string& page) {
  std::vector<DocCommand> commands;
  const auto lines = linesOf(readFile(kSource + "/" + page));
  bool in_sh = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind("```", 0) == 0) {
      in_sh = !in_sh && (line == "```sh" || line == "```bash");
      continue;
    }
    if (!in_sh) continue;
    std::string text = line.rfind("$ ", 0) == 0 ? line.substr(2) : line;
    std::string comment;
    if (const auto hash = text.find(" #"); hash != std::string::npos) {
      comment = text.substr(hash);
      text = text.substr(0, hash);
    }
    auto words = wordsOf(text);
    if (words.empty() || !isGcrun(words.front())) continue;
    words.erase(words.begin());
    commands.push_back({page + ":" + std::to_string(i + 1), words, comment});
  }
  return commands;
}

// The subcommand a command's words name: one word, two for bench and data.
std::vector<std::string> subcommandOf(const std::vector<std::string>& words) {
  if (words.empty() || words[0].rfind("-", 0) == 0) return {};
  if ((words[0] == "bench" || words[0] == "data") && words.size() > 1) return {words[0], words[1]};
  return {words[0]};
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += " " + word;
  return out;
}

bool has(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

// `gcrun show` with the preset, --config, --set and --plugin of an `experiment` command.
std::vector<std::string> asShow(const std::vector<std::string>& words) {
  std::vector<std::string> show = {"show", words.size() > 1 ? words[1] : ""};
  for (size_t i = 2; i + 1 < words.size(); ++i) {
    if (words[i] == "--set" || words[i] == "--config" || words[i] == "--plugin") {
      show.push_back(words[i]);
      show.push_back(words[++i]);
    }
  }
  return show;
}

// The words to run for `command`, or none where its flags alone are checked.
std::vector<std::string> runnable(const DocCommand& command) {
  const auto& words = command.words;
  if (command.comment.find("(not run") != std::string::npos) return {};
  if (has(words, "--help")) return words;
  const std::string first = words.empty() ? "" : words[0];
  if (first == "list" || first == "show" || first == "completion") return words;
  if (first == "experiment" && !has(words, "--resume")) return asShow(words);
  if (first == "study" && !has(words, "--status")) {
    auto planned = words;
    if (!has(planned, "--dry-run")) planned.push_back("--dry-run");
    return planned;
  }
  return {};
}

// The long flags `gcrun SUBCOMMAND --help` lists.
std::set<std::string> flagsOf(const std::vector<std::string>& subcommand) {
  static std::map<std::vector<std::string>, std::set<std::string>> cache;
  auto& flags = cache[subcommand];
  if (flags.empty()) {
    const auto help = runCommand(kGcrun + joined(subcommand) + " --help").output;
    const std::regex flag("--[a-z][a-z0-9-]*");
    for (std::sregex_iterator it(help.begin(), help.end(), flag), end; it != end; ++it) flags.insert(it->str());
  }
  return flags;
}

TEST(DocsCommands, EveryGcrunCommandWorks) {
  TempDir cwd;
  int ran = 0, flags_only = 0;
  for (const auto& page : pages()) {
    for (const auto& command : commandsIn(page)) {
      const auto subcommand = subcommandOf(command.words);
      const auto known = flagsOf(subcommand);
      for (const auto& word : command.words) {
        if (word.rfind("--", 0) != 0) continue;
        const auto flag = word.substr(0, word.find('='));
        EXPECT_TRUE(known.count(flag)) << command.where << ": gcrun" << joined(subcommand) << " has no " << flag;
      }
      const auto words = runnable(command);
      if (words.empty()) {
        ++flags_only;
        continue;
      }
      const auto result = runCommand("cd " + cwd.path().string() + " && " + kGcrun + joined(words) + " </dev/null");
      EXPECT_EQ(result.exit_code, 0) << command.where << ": gcrun" << joined(words) << "\n" << result.output;
      ++ran;
    }
  }
  // The pages hold a few dozen commands; an extractor that finds none must not pass.
  EXPECT_GE(ran, 15);
  EXPECT_GE(flags_only, 5);
}

// What the page between the markers says and what `command` prints must be the same text.
void expectGenerated(const std::string& page, const std::string& command) {
  const std::string begin = "<!-- BEGIN generated by `" + command + "` -->\n";
  const std::string end = "<!-- END generated -->";
  const auto text = readFile(kSource + "/" + page);
  const auto from = text.find(begin);
  const auto to = text.find(end);
  ASSERT_NE(from, std::string::npos) << page << " lacks " << begin;
  ASSERT_NE(to, std::string::npos) << page << " lacks " << end;
  const auto printed = runCommand(kGcrun + " " + command.substr(6) + " 2>/dev/null");
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  EXPECT_EQ(text.substr(from + begin.size(), to - from - begin.size()), printed.output)
      << page << " is out of date: run scripts/update-docs";
}

TEST(DocsGenerated, KeyTableIsCurrent) { expectGenerated("docs/keys.md", "gcrun list keys --markdown"); }

// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
std::string anchorOf(const std::string& heading) {
  std::string anchor;
  for (const unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_') anchor += static_cast<char>(std::tolower(c));
    if (c == ' ') anchor += '-';
  }
  return anchor;
}

std::set<std::string> anchorsIn(const std::string& path) {
  std::set<std::string> anchors;
  for (const auto& line : linesOf(readFile(path))) {
    const auto hashes = line.find_first_not_of('#');
    if (hashes > 0 && hashes != std::string::npos && line[hashes] == ' ')
      anchors.insert(anchorOf(line.substr(hashes + 1)));
  }
  return anchors;
}

TEST(DocsLinks, RelativeLinksFindTheirPageAndHeading) {
  const std::regex link(R"(\]\(([^)#\s]*)(#[^)\s]*)?\))");
  int checked = 0;
  for (const auto& page : pages()) {
    const auto folder = page.find('/') == std::string::npos ? std::string() : page.substr(0, page.rfind('/') + 1);
    const auto text = readFile(kSource + "/" + page);
    for (std::sregex_iterator it(text.begin(), text.end(), link), end; it != end; ++it) {
      const std::string target = (*it)[1].str(), anchor = (*it)[2].str();
      if (target.find("://") != std::string::npos) continue;
      const auto path = kSource + "/" + (target.empty() ? page : folder + target);
      ++checked;
      EXPECT_TRUE(std::filesystem::exists(path)) << page << ": no " << target;
      if (!anchor.empty()) {
        EXPECT_TRUE(anchorsIn(path).count(anchor.substr(1))) << page << ": no " << target << anchor;
      }
    }
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
