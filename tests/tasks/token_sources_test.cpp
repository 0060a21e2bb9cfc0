// The language-model task's data files (tasks/token_sources/): pre-tokenized uint16 files of
// nanoGPT (train.bin) and llm.c (token shards) memory-mapped and checked, their ids read as
// written (above 32,767 too); nanoGPT's meta.pkl as Python's pickle writes it; globs of text
// files per split; each malformed file refused naming the file.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tasks/language_model.h"
#include "tasks/token_files.h"
#include "tasks/token_sources/file_globs.h"
#include "tasks/token_sources/meta_pickle.h"
#include "tasks/token_sources/token_id_splits.h"
#include "tasks/token_sources/token_shards.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::tasks {
namespace {

using gcrun::testing::expectMessageHas;
using gcrun::testing::userErrorOf;
using testing::TempDir;

void writeBytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string uint16Bytes(const std::vector<uint16_t>& ids) {
  std::string bytes(2 * ids.size(), '\0');
  std::memcpy(bytes.data(), ids.data(), bytes.size());
  return bytes;
}

// llm.c's write_datafile: 256 int32 (magic, version, count, zeros), then the tokens.
std::string shardBytes(const std::vector<uint16_t>& ids, int32_t version = 1,
                       std::optional<int64_t> declared = std::nullopt) {
  std::vector<int32_t> header(256, 0);
  header[0] = kLlmcShardMagic;
  header[1] = version;
  header[2] = static_cast<int32_t>(declared.value_or(static_cast<int64_t>(ids.size())));
  std::string bytes(1024, '\0');
  std::memcpy(bytes.data(), header.data(), bytes.size());
  return bytes + uint16Bytes(ids);
}

std::vector<int64_t> idsOf(const TokenShard& shard) {
  const at::Tensor wide = unsignedTokenIds(shard.ids);
  return {wide.data_ptr<int64_t>(), wide.data_ptr<int64_t>() + wide.numel()};
}

const std::vector<uint16_t> kIds = {0, 1, 32767, 32768, 40000, 50256, 65535, 7};
const std::vector<int64_t> kWide(kIds.begin(), kIds.end());

TEST(TokenShards, NanoGptBinIdsAreReadAsWrittenAbove32767Too) {
  TempDir dir;
  writeBytes(dir.file("train.bin"), uint16Bytes(kIds));
  const TokenShard shard = mapTokenShard(dir.file("train.bin"));
  EXPECT_STREQ(shard.layout, "nanoGPT .bin");
  EXPECT_EQ(shard.ids.scalar_type(), at::kShort);
  EXPECT_EQ(idsOf(shard), kWide);
}

TEST(TokenShards, LlmcShardIdsAreReadAsWrittenAfterTheHeader) {
  TempDir dir;
  writeBytes(dir.file("s.bin"), shardBytes(kIds));
  const TokenShard shard = mapTokenShard(dir.file("s.bin"));
  EXPECT_STREQ(shard.layout, "llm.c shard");
  EXPECT_EQ(idsOf(shard), kWide);
}

// What nanoGPT's prepare.py writes (np.array(ids, dtype=np.uint16).tofile): Python's array 'H'
// writes the same bytes, and stands in where numpy is not installed.
TEST(TokenShards, IdsWrittenByPythonAreReadBack) {
  TempDir dir;
  const std::string path = dir.file("val.bin");
  const std::string script =
      "python3 -c \"import array; array.array('H', [0, 1, 32767, 32768, 40000, 50256, "
      "65535, 7]).tofile(open('" +
      path + "', 'wb'))\"";
  ASSERT_EQ(std::system(script.c_str()), 0);
  EXPECT_EQ(idsOf(mapTokenShard(path)), kWide);
}

TEST(TokenShards, WindowBatchesReadTheUnsignedIds) {
  TempDir dir;
  writeBytes(dir.file("train.bin"), uint16Bytes(kIds));
  const TokenShard shard = mapTokenShard(dir.file("train.bin"));
  const Batch batch = windowBatch(shard.ids, at::tensor({1}, at::kLong), 3);
  EXPECT_EQ(batch.inputs.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(batch.inputs, at::tensor({32768, 40000, 50256}, at::kLong).unsqueeze(0)));
  EXPECT_TRUE(at::equal(batch.targets, at::tensor({40000, 50256, 65535}, at::kLong).unsqueeze(0)));
}

TEST(TokenShards, MalformedFilesAreRefusedNamingTheFile) {
  TempDir dir;
  const std::string path = dir.file("bad.bin");
  const auto refusal = [&](const std::string& bytes) {
    writeBytes(path, bytes);
    return userErrorOf([&] { mapTokenShard(path); });
  };
  expectMessageHas(refusal(shardBytes(kIds).substr(0, 600)), {path, "600 bytes", "truncated"});
  expectMessageHas(refusal(shardBytes(kIds, 2)), {path, "version 2", "version 1"});
  expectMessageHas(refusal(shardBytes(kIds).substr(0, 1024 + 5 * 2)), {path, "declares 8 tokens", "truncated"});
  expectMessageHas(refusal(shardBytes(kIds) + "xx"), {path, "declares 8 tokens", "1042"});
  expectMessageHas(refusal(shardBytes(kIds, 1, 2147483647)), {path, "declares 2147483647 tokens"});
  expectMessageHas(refusal(shardBytes(kIds, 1, -5)), {path, "declares -5 tokens"});
  expectMessageHas(refusal(uint16Bytes(kIds) + "x"), {path, "odd size"});
}

TEST(TokenShards, AnIdOutsideTheVocabularyIsRefusedWithItsOffset) {
  TempDir dir;
  writeBytes(dir.file("train.bin"), uint16Bytes(kIds));
  const TokenShard shard = mapTokenShard(dir.file("train.bin"));
  EXPECT_NO_THROW(checkTokenIds(shard, 65536, dir.file("train.bin")));
  expectMessageHas(userErrorOf([&] { checkTokenIds(shard, 32768, dir.file("train.bin")); }),
                   {dir.file("train.bin"), "token id 32768 at byte 6 (token 3)", "vocabulary of 32768"});
  writeBytes(dir.file("s.bin"), shardBytes(kIds));
  expectMessageHas(userErrorOf([&] { checkTokenIds(mapTokenShard(dir.file("s.bin")), 50257, dir.file("s.bin")); }),
                   {"token id 65535 at byte 1036 (token 6)"});
}

// Another process truncating a token file while a run has it mapped: reading a page past the new
// end raises SIGBUS, which must end the run with a line naming the file, not kill it unexplained.
TEST(TokenShards, AFileTruncatedWhileMappedEndsTheRunNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // LibTorch may have started threads
  TempDir dir;
  const std::string path = dir.file("train.bin");
  writeBytes(path, uint16Bytes(std::vector<uint16_t>(16384, 7)));  // 32 KiB: several pages
  const TokenShard shard = mapTokenShard(path);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  const auto* ids = reinterpret_cast<const volatile uint16_t*>(shard.ids.data_ptr<int16_t>());
  EXPECT_EXIT(std::printf("%d\n", static_cast<int>(ids[16383])), ::testing::ExitedWithCode(1),
              "gcrun: .*/train.bin shrank while this run read it");  // the re-run child has its own dir
}

// A SIGBUS outside every mapped token file keeps its default: the process dies of the signal.
TEST(TokenShards, ABusErrorElsewhereKeepsItsDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir dir;
  writeBytes(dir.file("train.bin"), uint16Bytes(kIds));
  const TokenShard shard = mapTokenShard(dir.file("train.bin"));
  EXPECT_EXIT(::raise(SIGBUS), ::testing::KilledBySignal(SIGBUS), "");
}

TEST(TokenIdSplits, SeveralFilesJoinInOrderAndTheTestSplitMayShareTheValidation) {
  TempDir dir;
  writeBytes(dir.file("a.bin"), shardBytes({1, 2, 3}));
  writeBytes(dir.file("b.bin"), shardBytes({60000, 5}));
  writeBytes(dir.file("v.bin"), uint16Bytes({9, 8}));
  const auto splits =
      readTokenIdSplits({{{dir.file("a.bin"), dir.file("b.bin")}, {dir.file("v.bin")}, {dir.file("v.bin")}}}, 65536);
  EXPECT_TRUE(at::equal(unsignedTokenIds(splits.ids[0]), at::tensor({1, 2, 3, 60000, 5}, at::kLong)));
  EXPECT_TRUE(splits.ids[2].is_same(splits.ids[1]));
}

// pickle.dumps({'vocab_size': 9, 'itos': {i: ch}, 'stoi': {ch: i}}, protocol=4) for 'hello world\n'.
const char kMetaProtocol4[] =
    "\x80\x04\x95\x84\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x0a\x76\x6f\x63\x61\x62\x5f\x73\x69\x7a\x65\x94"
    "\x4b\x09\x8c\x04\x69\x74\x6f\x73\x94\x7d\x94\x28\x4b\x00\x8c\x01\x0a\x94\x4b\x01\x8c\x01\x20\x94\x4b\x02\x8c"
    "\x01\x64\x94\x4b\x03\x8c\x01\x65\x94\x4b\x04\x8c\x01\x68\x94\x4b\x05\x8c\x01\x6c\x94\x4b\x06\x8c\x01\x6f\x94"
    "\x4b\x07\x8c\x01\x72\x94\x4b\x08\x8c\x01\x77\x94\x75\x8c\x04\x73\x74\x6f\x69\x94\x7d\x94\x28\x68\x04\x4b\x00"
    "\x68\x05\x4b\x01\x68\x06\x4b\x02\x68\x07\x4b\x03\x68\x08\x4b\x04\x68\x09\x4b\x05\x68\x0a\x4b\x06\x68\x0b\x4b"
    "\x07\x68\x0c\x4b\x08\x75\x75\x2e";
// The same dict at protocol 2 (BINPUT/BINGET memo, BINUNICODE).
const char kMetaProtocol2[] =
    "\x80\x02\x7d\x71\x00\x28\x58\x0a\x00\x00\x00\x76\x6f\x63\x61\x62\x5f\x73\x69\x7a\x65\x71\x01\x4b\x09\x58\x04"
    "\x00\x00\x00\x69\x74\x6f\x73\x71\x02\x7d\x71\x03\x28\x4b\x00\x58\x01\x00\x00\x00\x0a\x71\x04\x4b\x01\x58\x01"
    "\x00\x00\x00\x20\x71\x05\x4b\x02\x58\x01\x00\x00\x00\x64\x71\x06\x4b\x03\x58\x01\x00\x00\x00\x65\x71\x07\x4b"
    "\x04\x58\x01\x00\x00\x00\x68\x71\x08\x4b\x05\x58\x01\x00\x00\x00\x6c\x71\x09\x4b\x06\x58\x01\x00\x00\x00\x6f"
    "\x71\x0a\x4b\x07\x58\x01\x00\x00\x00\x72\x71\x0b\x4b\x08\x58\x01\x00\x00\x00\x77\x71\x0c\x75\x58\x04\x00\x00"
    "\x00\x73\x74\x6f\x69\x71\x0d\x7d\x71\x0e\x28\x68\x04\x4b\x00\x68\x05\x4b\x01\x68\x06\x4b\x02\x68\x07\x4b\x03"
    "\x68\x08\x4b\x04\x68\x09\x4b\x05\x68\x0a\x4b\x06\x68\x0b\x4b\x07\x68\x0c\x4b\x08\x75\x75\x2e";

TEST(MetaPickle, NanoGptsVocabSizeIsReadFromPythonsPickles) {
  EXPECT_EQ(pickledVocabularySize({kMetaProtocol4, sizeof(kMetaProtocol4) - 1}, "meta.pkl"), 9);
  EXPECT_EQ(pickledVocabularySize({kMetaProtocol2, sizeof(kMetaProtocol2) - 1}, "meta.pkl"), 9);
  TempDir dir;
  writeBytes(dir.file("meta.pkl"), std::string(kMetaProtocol4, sizeof(kMetaProtocol4) - 1));
  EXPECT_EQ(tokenVocabulary(0, dir.path().string()).first, 9);
  EXPECT_EQ(tokenVocabulary(300, dir.path().string()).first, 300);  // task.vocabulary_size first
  TempDir empty;
  EXPECT_EQ(tokenVocabulary(0, empty.path().string()).first, kDefaultTokenVocabulary);
}

TEST(MetaPickle, AnythingElseIsRefusedNamingTheFile) {
  const std::string good(kMetaProtocol4, sizeof(kMetaProtocol4) - 1);
  expectMessageHas(userErrorOf([&] { pickledVocabularySize(good.substr(0, 60), "m.pkl"); }), {"m.pkl", "past the end"});
  // A GLOBAL (c): what would call code in Python's unpickler.
  expectMessageHas(userErrorOf([&] {
                     pickledVocabularySize(
                         "\x80\x02"
                         "cos\nsystem\n",
                         "m.pkl");
                   }),
                   {"m.pkl", "opcode 99"});
  expectMessageHas(userErrorOf([&] { pickledVocabularySize("\x80\x02K\x05.", "m.pkl"); }),
                   {"m.pkl", "not a pickled dict"});
}

TEST(FileGlobs, MatchesAreSortedAndRefusalsNameTheKeyAndPattern) {
  TempDir dir;
  for (const char* name : {"b.txt", "a.txt", "c.md"}) writeBytes(dir.file(name), "x");
  EXPECT_EQ(expandFileGlob("task.train_files", "*.txt", dir.path().string()),
            (std::vector<std::string>{dir.file("a.txt"), dir.file("b.txt")}));
  EXPECT_EQ(expandFileGlob("task.train_files", dir.file("c.*"), "/elsewhere"),
            std::vector<std::string>{dir.file("c.md")});
  expectMessageHas(userErrorOf([&] { expandFileGlob("task.test_files", "*.none", dir.path().string()); }),
                   {"task.test_files '*.none'", "matches no file"});
  std::filesystem::create_directory(dir.file("d.txt"));
  expectMessageHas(userErrorOf([&] { expandFileGlob("task.train_files", "*.txt", dir.path().string()); }),
                   {"task.train_files '*.txt'", dir.file("d.txt"), "is a directory"});
  ASSERT_EQ(::mkfifo(dir.file("f.md").c_str(), 0644), 0);
  expectMessageHas(userErrorOf([&] { expandFileGlob("task.train_files", "*.md", dir.path().string()); }),
                   {dir.file("f.md"), "not a regular file"});
}

TEST(FileGlobs, TooManyFilesAreRefused) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("many"));
  for (size_t i = 0; i <= kMaxSplitFiles; ++i) writeBytes(dir.file("many/" + std::to_string(i)), "");
  expectMessageHas(userErrorOf([&] { expandFileGlob("task.train_files", "many/*", dir.path().string()); }),
                   {"task.train_files 'many/*'", "matches 4097 files", "4096"});
}

TEST(TokenFiles, ASplitsFilesAreReadInOrderAsOneText) {
  TempDir dir;
  writeBytes(dir.file("t1"), "ab\n");
  writeBytes(dir.file("t2"), "cd e\n");
  writeBytes(dir.file("v"), "ab\n");
  const SplitFiles files = {{{dir.file("t1"), dir.file("t2")}, {dir.file("v")}, {dir.file("v"), dir.file("t1")}}};
  EXPECT_EQ(readSplitText(files[0], 0), "ab\ncd e\n");
  const TokenCorpus chars = readTokenCorpus(files, TokenLevel::kChar);
  EXPECT_EQ(chars.ids[0].numel(), 8);
  EXPECT_EQ(chars.ids[2].numel(), 6);
  const TokenCorpus words = readTokenCorpus(files, TokenLevel::kWord);
  EXPECT_EQ(words.ids[0].numel(), 5);  // ab <eos> cd e <eos>
  EXPECT_EQ(words.ids[2].numel(), 4);
}

}  // namespace
}  // namespace gcrun::tasks
