// Writes one C++ translation unit holding every ```cpp block of one markdown file, so that the
// build compiles what the documentation shows (scheme: docs/testing.md, "Code in the docs").
//
//   extract_snippets <file.md> <name shown in diagnostics> <out.cpp>
//
// A block is, by the marker comment on the last non-blank line before its fence:
//   (none)                         a complete translation unit
//   <!-- snippet: fragment -->     statements: compiled as the body of a function
//   <!-- snippet: fragment         ... with declarations the statements assume (hidden in the
//   extern amsp::Mesh mesh;        rendered page), placed before that function
//   -->
//   <!-- snippet: synopsis -->     C++-like notation of an API (`...`, sketched concepts): not compiled
// Each block gets a namespace of its own; every #include line moves to the top of the file, and
// #line directives point compiler messages at the markdown file. Exit status 1 with a message
// naming file:line for a malformed marker or an unterminated block.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Marker {
  std::string kind;                 // "", "fragment" or "synopsis"
  std::vector<std::string> prelude;  // declarations of a fragment
  int prelude_line = 0;             // markdown line of the first prelude line
};

struct Block {
  Marker marker;
  int first_line = 0;  // markdown line of the block's first code line
  std::vector<std::string> lines;
};

[[noreturn]] void die(const std::string& where, int line, const std::string& what) {
  std::cerr << where << ':' << line << ": " << what << '\n';
  std::exit(1);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The blocks of `lines`, with the marker that precedes each.
std::vector<Block> read_blocks(const std::vector<std::string>& lines, const std::string& where) {
  std::vector<Block> blocks;
  Marker marker;
  bool marker_is_last = false;  // the marker is the last non-blank text so far
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string line = trim(lines[i]);
    const int number = static_cast<int>(i) + 1;
    if (line.starts_with("<!-- snippet:")) {
      marker = Marker{};
      std::string rest = trim(line.substr(13));
      const bool closed = rest.ends_with("-->");
      if (closed) rest = trim(rest.substr(0, rest.size() - 3));
      marker.kind = rest;
      if (marker.kind != "fragment" && marker.kind != "synopsis")
        die(where, number, "unknown snippet marker '" + marker.kind + "' (expected fragment or synopsis)");
      if (!closed) {
        if (marker.kind != "fragment") die(where, number, "only a fragment marker carries declarations");
        marker.prelude_line = number + 1;
        for (++i; i < lines.size() && trim(lines[i]) != "-->"; ++i) marker.prelude.push_back(lines[i]);
        if (i == lines.size()) die(where, number, "snippet marker without its closing -->");
      }
      marker_is_last = true;
      continue;
    }
    if (line.starts_with("```cpp")) {
      Block block{marker_is_last ? marker : Marker{}, number + 1, {}};
      for (++i; i < lines.size() && !trim(lines[i]).starts_with("```"); ++i) block.lines.push_back(lines[i]);
      if (i == lines.size()) die(where, number, "```cpp block without its closing fence");
      blocks.push_back(std::move(block));
      marker_is_last = false;
      continue;
    }
    if (line.starts_with("```")) {  // another language: skip it whole
      for (++i; i < lines.size() && !trim(lines[i]).starts_with("```"); ++i) {
      }
    }
    if (!line.empty()) marker_is_last = false;
  }
  return blocks;
}

bool is_include(const std::string& line) {
  const std::string t = trim(line);
  return t.starts_with("#include") || t.starts_with("# include");
}

// Appends `lines` after a #line directive; #include lines become blank (they were hoisted).
void emit(std::ostringstream& out, const std::vector<std::string>& lines, int first_line, const std::string& where) {
  out << "#line " << first_line << " \"" << where << "\"\n";
  for (const std::string& line : lines) out << (is_include(line) ? "" : line) << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: extract_snippets <file.md> <display name> <out.cpp>\n";
    return 2;
  }
  const std::string where = argv[2];
  std::ifstream in(argv[1]);
  if (!in) die(argv[1], 0, "cannot read");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::vector<Block> blocks = read_blocks(lines, where);

  std::ostringstream out;
  out << "// Generated from " << where << " by tests/docs/extract_snippets.cpp: do not edit.\n"
      << "#include <amsp/amsp.hpp>\n";
  int compiled = 0, synopses = 0;
  for (const Block& b : blocks) {
    if (b.marker.kind == "synopsis") continue;
    for (const std::vector<std::string>* part : {&b.marker.prelude, &b.lines})
      for (const std::string& line : *part)
        if (is_include(line)) out << trim(line) << '\n';
  }
  for (const Block& b : blocks) {
    if (b.marker.kind == "synopsis") {
      ++synopses;
      continue;
    }
    ++compiled;
    out << "\nnamespace amsp_doc_snippet_" << compiled << " {\n";
    if (b.marker.kind == "fragment") {
      if (!b.marker.prelude.empty()) emit(out, b.marker.prelude, b.marker.prelude_line, where);
      out << "[[maybe_unused]] void fragment() {\n";
      emit(out, b.lines, b.first_line, where);
      out << "}\n";
    } else {
      emit(out, b.lines, b.first_line, where);
    }
    out << "}  // namespace amsp_doc_snippet_" << compiled << '\n';
  }
  out << "\n// " << compiled << " snippets compiled, " << synopses << " synopses skipped\n";

  // Rewrite only on change, so that an unchanged document does not recompile.
  const std::string text = out.str();
  std::ifstream old(argv[3]);
  std::stringstream previous;
  previous << old.rdbuf();
  if (!old || previous.str() != text) {
    std::ofstream file(argv[3]);
    file << text;
    if (!file) die(argv[3], 0, "cannot write");
  }
  std::cout << where << ": " << compiled << " snippets compiled, " << synopses << " synopses skipped\n";
  return 0;
}
