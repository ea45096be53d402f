#!/bin/sh
# embed_text.sh INPUT OUTPUT FUNCTION: a C++ file whose FUNCTION returns
# INPUT's text (used for railgated's compiled-in default config).
set -e
{
  printf '#include <string_view>\nnamespace railgate::config {\n'
  printf 'std::string_view %s() noexcept {\n    static const char text[] = R"RGTEXT(' "$3"
  cat "$1"
  printf ')RGTEXT";\n    return {text, sizeof text - 1};\n}\n}\n'
} > "$2"
