// The token files of the wikitext2 and language-model tasks as data (docs/security.md): ids held in
// the smallest type that numbers the vocabulary, so that memory stays a small multiple of the
// files; files of the kernel refused by name; memory beyond the machine's refused by name.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "outputs/files/safe_files.h"
#include "tasks/token_files.h"
#include "tests/support/temp_dir.h"
#include "tests/support/user_error.h"

namespace gcrun::tasks {
namespace {

using gcrun::testing::expectMessageHas;
using gcrun::testing::userErrorOf;
using testing::TempDir;

// The three files, the training one `train`, the others one line of its first word.
void writeFiles(const TempDir& dir, const std::string& train) {
  std::ofstream(dir.file("wiki.train.tokens"), std::ios::binary) << train;
  std::ofstream(dir.file("wiki.valid.tokens")) << train.substr(0, train.find(' ')) << "\n";
  std::ofstream(dir.file("wiki.test.tokens")) << "never seen\n";
}

// `count` distinct words, one per line.
std::string distinctWords(int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += "w" + std::to_string(i) + "\n";
  return text;
}

// The memory the loader holds per token: today's int64 ids cost 8 bytes per byte at char level.
TEST(TokenFiles, IdsTakeTheSmallestTypeOfTheVocabulary) {
  TempDir dir;
  writeFiles(dir, std::string(1000, 'x') + " a b\n");
  const TokenCorpus chars = readTokenCorpus(dir.path().string(), TokenLevel::kChar);
  EXPECT_EQ(chars.ids[0].scalar_type(), at::kByte);
  EXPECT_EQ(chars.ids[0].nbytes(), 1005u);  // one byte per byte of the file
  const TokenCorpus few = readTokenCorpus(dir.path().string(), TokenLevel::kWord);
  EXPECT_EQ(few.ids[0].scalar_type(), at::kByte);
  EXPECT_EQ(few.ids[0].numel(), 4);
  // 300 words and <eos>, <unk>, <pad>: more than a byte numbers.
  writeFiles(dir, distinctWords(300));
  const TokenCorpus some = readTokenCorpus(dir.path().string(), TokenLevel::kWord);
  EXPECT_EQ(some.vocabulary, 303);
  EXPECT_EQ(some.ids[0].scalar_type(), at::kShort);
  writeFiles(dir, distinctWords(40000));
  const TokenCorpus many = readTokenCorpus(dir.path().string(), TokenLevel::kWord);
  EXPECT_EQ(many.ids[0].scalar_type(), at::kInt);
  // The ids are those of the vocabulary: word i's line is "w<i> <eos>".
  const at::Tensor train = many.ids[0].to(at::kLong);
  EXPECT_EQ(many.words.at(train[2 * 123].item<int64_t>()), "w123");
  EXPECT_EQ(many.words.at(train[2 * 123 + 1].item<int64_t>()), "<eos>");
  EXPECT_EQ(many.ids[2].to(at::kLong)[0].item<int64_t>(), kUnknownWord);
  EXPECT_EQ(idType(256), at::kByte);
  EXPECT_EQ(idType(257), at::kShort);
  EXPECT_EQ(idType(32768), at::kShort);
  EXPECT_EQ(idType(32769), at::kInt);
}

// procfs calls /proc/self/environ a regular file of 0 bytes; read, it is this process's
// environment as "training data".
TEST(TokenFiles, AFileOfTheKernelIsRefusedByName) {
  TempDir dir;
  writeFiles(dir, "a b c d e f g h\n");
  std::filesystem::remove(dir.file("wiki.valid.tokens"));
  std::filesystem::create_symlink("/proc/self/environ", dir.file("wiki.valid.tokens"));
  for (const auto level : {TokenLevel::kChar, TokenLevel::kWord}) {
    expectMessageHas(userErrorOf([&] { readTokenCorpus(dir.path().string(), level); }),
                     {dir.file("wiki.valid.tokens"), "kernel"});
  }
  // The shared bounded read refuses it for every file gcrun reads as data.
  expectMessageHas(userErrorOf([] { files::readBoundedFile("/proc/self/environ", 1 << 20); }),
                   {"/proc/self/environ", "kernel"});
  const std::string sysfs = "/sys/devices/system/cpu/online";
  if (std::filesystem::exists(sysfs)) {
    expectMessageHas(userErrorOf([&] { files::readBoundedFile(sysfs, 1 << 20); }), {sysfs, "kernel"});
  }
}

TEST(TokenFiles, MemoryBeyondWhatTheMachineHasIsRefusedNamingTheFileAndTheNeed) {
  EXPECT_NO_THROW(requireMemory("d/wiki.train.tokens", 1 << 20, 2 << 20, 3 << 20));
  expectMessageHas(userErrorOf([] { requireMemory("d/wiki.train.tokens", 1 << 20, 8ull << 30, 4ull << 30); }),
                   {"d/wiki.train.tokens", "8192 MiB", "1 MiB already held", "4096 MiB"});
}

}  // namespace
}  // namespace gcrun::tasks
