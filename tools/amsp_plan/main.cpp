// amsp-plan: the planner's command line (options and output: amsp-plan --help, docs/planner.md).
#include <iostream>
#include <string>
#include <vector>

#include "plan_cli.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return amsp_plan::cli_main(args, std::cout, std::cerr);
}
