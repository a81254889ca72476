#include "jinja/value.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(ValueTest, ReprFollowsPython) {
  EXPECT_EQ(Value(true).ToString(), "True");
  EXPECT_EQ(Value::None().ToString(), "None");
  EXPECT_EQ(Value().ToString(), "");
  EXPECT_EQ(Value(1.0).ToString(), "1.0");
  EXPECT_EQ(Value(0.1).ToString(), "0.1");
  EXPECT_EQ(Value(1e20).ToString(), "1e+20");
  EXPECT_EQ(Value::List({Value("a"), Value(1), Value("it's")}).ToString(), "['a', 1, \"it's\"]");
  EXPECT_EQ(Value::Dict({{"k", Value(false)}}).ToString(), "{'k': False}");
}

TEST(ValueTest, JsonKeepsInsertionOrderAndUnicode) {
  Value v = Value::Dict({{"z", Value(1)}, {"a", Value::List({Value("é\n"), Value::None()})}});
  EXPECT_EQ(v.ToJson(), "{\"z\": 1, \"a\": [\"é\\n\", null]}");
  EXPECT_EQ(v.ToJson(2), "{\n  \"z\": 1,\n  \"a\": [\n    \"é\\n\",\n    null\n  ]\n}");
}

TEST(ValueTest, ListsShareStorageUntilDeepCopy) {
  Value a = Value::List({Value(1)});
  Value b = a;
  b.list().push_back(Value(2));
  EXPECT_EQ(a.list().size(), 2u);
  Value c = a.DeepCopy();
  c.list().push_back(Value(3));
  EXPECT_EQ(a.list().size(), 2u);
}

TEST(ValueTest, EqualityIsNumericAcrossIntFloatBool) {
  EXPECT_TRUE(Value(1).Equals(Value(1.0)));
  EXPECT_TRUE(Value(true).Equals(Value(1)));
  EXPECT_FALSE(Value("1").Equals(Value(1)));
  EXPECT_TRUE(Value::Dict({{"a", Value(1)}}).Equals(Value::Dict({{"a", Value(1.0)}})));
}

TEST(ValueTest, BuildsFromCppScalarsAndContainers) {
  std::vector<int> v = {1, 2, 3};
  Value size(v.size());
  EXPECT_TRUE(size.is_int());
  EXPECT_EQ(size.int_value(), 3);
  EXPECT_TRUE(Value("s").is_string());
  EXPECT_TRUE(Value(std::string_view("s")).is_string());
  EXPECT_TRUE(Value(2.0).is_float());
  EXPECT_TRUE(Value(false).is_bool());
  Value d = Value::Dict({{"a", Value(1)}});
  d.Set("b", Value::List({Value("x")}));
  ASSERT_NE(d.Find("b"), nullptr);
  EXPECT_EQ(d.Find("b")->list()[0].string_value(), "x");
  EXPECT_EQ(d.Find("missing"), nullptr);
  EXPECT_FALSE(Value().Truthy());
  EXPECT_FALSE(Value::List().Truthy());
  EXPECT_TRUE(Value::List({Value(0)}).Truthy());
}

TEST(ValueTest, Utf8LengthCountsCodePoints) {
  EXPECT_EQ(Utf8Length("héllo"), 5u);
  EXPECT_EQ(Utf8Length("\xff\xfe"), 2u);  // invalid bytes count one each
}

}  // namespace
}  // namespace tern
