// The char and word levels' tokenizers (tasks/tokenizers/text_tokenizers.h): ids as training
// numbers them, text back, and a prompt they cannot represent refused in one line.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hyperparams/base/errors.h"
#include "tasks/tokenizers/text_tokenizers.h"
#include "tasks/tokenizers/tokenizer.h"

namespace gcrun::tasks {
namespace {

TEST(CharacterTokenizer, NumbersBytesByRankAndDecodesThemBack) {
  const auto tokenizer = characterTokenizer({'\n', ' ', 'a', 'b', 'c'});
  EXPECT_EQ(tokenizer->vocabularySize(), 5);
  EXPECT_EQ(tokenizer->encode("ab c\n"), (std::vector<int64_t>{2, 3, 1, 4, 0}));
  EXPECT_EQ(tokenizer->decode({2, 3, 1, 4, 0}), "ab c\n");
}

TEST(CharacterTokenizer, AByteOutsideTheVocabularyIsOneLineNamingIt) {
  const auto tokenizer = characterTokenizer({'\n', 'a', 'b'});
  try {
    tokenizer->encode("ab\x1b");
    FAIL() << "no error";
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("0x1b"), std::string::npos) << message;
    EXPECT_NE(message.find("knows the 3 bytes"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(WordTokenizer, ReadsTextAsTrainingDidAndJoinsWordsBack) {
  const auto tokenizer = wordTokenizer({"<unk>", "<pad>", "<eos>", "the", "cat", "sat"});
  // Lower-cased; a line break is <eos>, none after a last line without one; unknown words <unk>.
  EXPECT_EQ(tokenizer->encode("The  cat\nsat dog"), (std::vector<int64_t>{3, 4, 2, 5, 0}));
  EXPECT_EQ(tokenizer->encode("the\n"), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(tokenizer->decode({3, 4, 2, 5, 0}), "the cat\nsat <unk>");
  EXPECT_EQ(tokenizer->decode({2, 3}), "\nthe");
}

TEST(TokenizerRegistry, KnowsTheCharAndWordLevels) {
  EXPECT_TRUE(tokenizerRegistry().contains("char"));
  EXPECT_TRUE(tokenizerRegistry().contains("word"));
}

}  // namespace
}  // namespace gcrun::tasks
