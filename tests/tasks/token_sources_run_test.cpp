// `gcrun` on the language-model task's own data files: nanoGPT's train.bin/val.bin (level tokens,
// the vocabulary from meta.pkl), llm.c's token shards by glob (ids above 32,767), text files by
// glob, each run saying in one line what it read; and each malformed token file or glob refused in
// one line, exit 2, naming the file or the key.
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/command.h"
#include "tests/support/refusal.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using gcrun::testing::contains;
using gcrun::testing::expectRefused;
using gcrun::testing::runCommand;
using gcrun::testing::TempDir;

const std::string kGcrun = GCRUN_BINARY_PATH;
// Every command has a time limit: a FIFO that is waited on would otherwise hang the suite.
const std::string kTinyGpt =
    " --set training.max_steps=3 --set training.batch_size=2 --set task.layers=1 --set task.heads=2"
    " --set task.width=16 --set task.context=8 --set evaluation.max_samples=64 --set output.sinks=[jsonl]";

void writeBytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// `count` ids cycling below `vocabulary`, from `first` on, as uint16 bytes.
std::string idBytes(int count, int vocabulary, int first = 0) {
  std::string bytes;
  for (int i = 0; i < count; ++i) {
    const uint16_t id = static_cast<uint16_t>((first + 7 * i) % vocabulary);
    bytes.append(reinterpret_cast<const char*>(&id), 2);
  }
  return bytes;
}

std::string shard(const std::string& tokens, int32_t version = 1) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = static_cast<int32_t>(tokens.size() / 2);
  std::string bytes(1024, '\0');
  std::memcpy(bytes.data(), header.data(), bytes.size());
  return bytes + tokens;
}

gcrun::testing::CommandResult runGpt(const TempDir& data, const std::string& out, const std::string& sets) {
  return runCommand("timeout 120 " + kGcrun + " experiment brown-gpt-adamw --output-dir " + out +
                    " --set task.data_dir=" + data.path().string() + kTinyGpt + sets);
}

// pickle.dumps({'vocab_size': 65}, protocol=4), as nanoGPT's shakespeare_char writes its meta.pkl.
const char kMeta65[] = "\x80\x04\x95\x13\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\nvocab_size\x94KAs.";

TEST(TokenFilesRun, NanoGptBinsTrainWithMetaPklsVocabulary) {
  TempDir data, out;
  writeBytes(data.file("train.bin"), idBytes(4000, 65));
  writeBytes(data.file("val.bin"), idBytes(400, 65, 3));
  writeBytes(data.file("meta.pkl"), std::string(kMeta65, sizeof(kMeta65) - 1));
  const auto result = runGpt(data, out.file("run"), " --set task.level=tokens");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output,
                       "data: 4,000 train / 400 validation / 400 test tokens, vocabulary 65 "
                       "(nanoGPT .bin, tokens level, 2 files in " +
                           data.path().string()))
      << result.output;
  EXPECT_TRUE(contains(result.output, "the test split is the validation files")) << result.output;
  EXPECT_TRUE(contains(result.output, "meta.pkl's vocab_size")) << result.output;
}

TEST(TokenFilesRun, LlmcShardsByGlobTrainOnIdsAbove32767) {
  TempDir data, out;
  writeBytes(data.file("fineweb_train_000001.bin"), shard(idBytes(2000, 65536, 30000)));
  writeBytes(data.file("fineweb_train_000002.bin"), shard(idBytes(2000, 65536, 60000)));
  writeBytes(data.file("fineweb_val_000000.bin"), shard(idBytes(300, 65536, 50000)));
  const auto result =
      runGpt(data, out.file("run"),
             " --set task.level=tokens --set task.vocabulary_size=65536"
             " --set task.train_files=fineweb_train_*.bin --set task.validation_files=fineweb_val_*.bin");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output,
                       "data: 4,000 train / 300 validation / 300 test tokens, vocabulary 65,536 "
                       "(llm.c shard, tokens level, 3 files (task.*_files)"))
      << result.output;
}

TEST(TokenFilesRun, TextFilesByGlobTrainAtCharAndWordLevel) {
  TempDir data, out;
  fs::create_directories(data.file("text"));
  for (const char* name : {"train-a.txt", "train-b.txt", "valid-a.txt", "valid-b.txt", "test-a.txt", "test-b.txt"}) {
    std::string text;
    for (int i = 0; i < 100; ++i) text += "the cat sat on mat " + std::to_string(i % 10) + "\n";
    writeBytes(data.file(std::string("text/") + name), text);
  }
  const std::string globs =
      " --set task.train_files=text/train-*.txt --set task.validation_files=text/valid-*.txt"
      " --set task.test_files=" +
      data.file("text/test-*.txt");
  for (const char* level : {"char", "word"}) {
    const auto result = runGpt(data, out.file(level), std::string(" --set task.level=") + level + globs);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(contains(result.output, std::string("(") + level + " level, 6 files (task.*_files))")) << result.output;
  }
}

TEST(TokenFilesRun, TheWikiLayoutSaysWhatItRead) {
  TempDir data, out;
  for (const char* name : {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"}) {
    writeBytes(data.file(name), std::string(300, 'a') + "b\n");
  }
  const auto result = runGpt(data, out.file("run"), " --set task.level=char");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output,
                       "data: 302 train / 302 validation / 302 test tokens, vocabulary 3 (char level, 3 "
                       "files in " +
                           data.path().string() + ")"))
      << result.output;
}

// Each malformed token file: one line, exit 2, naming the file.
TEST(TokenFilesRun, MalformedTokenFilesAreRefusedInOneLine) {
  const std::string good = idBytes(400, 65);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {shard(good).substr(0, 700), "truncated"},
      {shard(good, 2), "version 2"},
      {shard(good).substr(0, 1100), "declares 400 tokens"},
      {good + "x", "odd size"},
      {idBytes(400, 65) + idBytes(1, 65536, 65000), "token id 65000 at byte 800"},
  };
  for (const auto& [bytes, part] : cases) {
    TempDir data, out;
    writeBytes(data.file("train.bin"), bytes);
    writeBytes(data.file("val.bin"), idBytes(400, 65));
    const auto result = runGpt(data, out.file("run"), " --set task.level=tokens --set task.vocabulary_size=65");
    expectRefused(result, data.file("train.bin"));
    expectRefused(result, part);
  }
}

TEST(TokenFilesRun, GlobsMatchingNothingADirectoryOrAFifoAreRefusedInOneLine) {
  TempDir data, out;
  writeBytes(data.file("val.bin"), idBytes(400, 65));
  expectRefused(runGpt(data, out.file("a"), " --set task.level=tokens --set task.train_files=nothing_*.bin"),
                "task.train_files 'nothing_*.bin' matches no file");
  fs::create_directories(data.file("dir_1.bin"));
  expectRefused(runGpt(data, out.file("b"), " --set task.level=tokens --set task.train_files=dir_*.bin"),
                "is a directory");
  ASSERT_EQ(::mkfifo(data.file("fifo_1.bin").c_str(), 0644), 0);
  expectRefused(runGpt(data, out.file("c"), " --set task.level=tokens --set task.train_files=fifo_*.bin"),
                "not a regular file");
}

}  // namespace
