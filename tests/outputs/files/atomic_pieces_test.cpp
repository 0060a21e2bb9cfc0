// Directory::writeAtomicallyInPieces (outputs/files/safe_files.h): the pieces in order, all or
// nothing when the producer fails, and a symlink at the name replaced, never written through.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "outputs/files/safe_files.h"
#include "tests/support/command.h"
#include "tests/support/temp_dir.h"

namespace gcrun::files {
namespace {

using testing::readFile;
using testing::TempDir;

TEST(WriteAtomicallyInPieces, WritesThePiecesInOrder) {
  TempDir dir;
  Directory::open(dir.path().string(), false).writeAtomicallyInPieces("file", [](const Directory::PieceWriter& write) {
    write("header|");
    write(std::string(3, '\0'));
    write("|end");
  });
  EXPECT_EQ(readFile(dir.file("file")), std::string("header|") + std::string(3, '\0') + "|end");
}

TEST(WriteAtomicallyInPieces, AFailingProducerLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "old";
  const auto directory = Directory::open(dir.path().string(), false);
  EXPECT_THROW(directory.writeAtomicallyInPieces("file",
                                                 [](const Directory::PieceWriter& write) {
                                                   write("half");
                                                   throw std::runtime_error("the producer's failure");
                                                 }),
               std::runtime_error);
  EXPECT_EQ(readFile(dir.file("file")), "old");
  EXPECT_EQ(directory.entries(), std::vector<std::string>{"file"});
}

TEST(WriteAtomicallyInPieces, ASymlinkAtTheNameIsReplacedNotFollowed) {
  TempDir dir;
  std::ofstream(dir.file("target")) << "keep";
  std::filesystem::create_symlink(dir.file("target"), dir.file("link"));
  Directory::open(dir.path().string(), false).writeAtomicallyInPieces("link", [](const Directory::PieceWriter& write) {
    write("new");
  });
  EXPECT_EQ(readFile(dir.file("target")), "keep");
  EXPECT_FALSE(std::filesystem::is_symlink(dir.file("link")));
  EXPECT_EQ(readFile(dir.file("link")), "new");
}

}  // namespace
}  // namespace gcrun::files
