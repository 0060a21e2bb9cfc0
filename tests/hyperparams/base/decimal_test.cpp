// The one parser of numbers typed by people: plain decimals only.
#include "hyperparams/base/decimal.h"

#include <gtest/gtest.h>

namespace gcrun {
namespace {

TEST(Decimal, PlainDecimalsAreNumbers) {
  EXPECT_EQ(parseDecimal("16"), 16.0);
  EXPECT_EQ(parseDecimal("-0.5"), -0.5);
  EXPECT_EQ(parseDecimal("2.5e-3"), 2.5e-3);
  EXPECT_EQ(parseDecimal("1E+20"), 1e20);
  EXPECT_EQ(parseDecimal(".5"), 0.5);
  EXPECT_EQ(parseDecimal("5."), 5.0);
  EXPECT_EQ(parseWholeNumber("010"), 10);  // decimal, not octal
  EXPECT_EQ(parseWholeNumber("-3"), -3);
}

TEST(Decimal, AnythingElseIsNot) {
  for (const char* text : {"", "0x10", "0x1p-10", "inf", "nan", "-inf", " 1", "1 ", "+1", "1e", "1e+", ".", "-", "1,5",
                           "1e999", "--1", "1.2.3"}) {
    EXPECT_FALSE(parseDecimal(text).has_value()) << text;
  }
  for (const char* text : {"", "0x10", "1.0", "1e3", "+1", " 1", "99999999999999999999", "-"}) {
    EXPECT_FALSE(parseWholeNumber(text).has_value()) << text;
  }
}

TEST(Decimal, TheLengthInFrontOfAUnit) {
  EXPECT_EQ(decimalLength("10gbit"), 2u);
  EXPECT_EQ(decimalLength("1.5e3ms"), 5u);
  EXPECT_EQ(decimalLength("2e"), 1u);  // "e" alone is no exponent: the unit's, or nothing
  EXPECT_EQ(decimalLength("0x10gbit"), 1u);
  EXPECT_EQ(decimalLength("gbit"), 0u);
  EXPECT_EQ(decimalLength("-.5s"), 3u);
}

}  // namespace
}  // namespace gcrun
