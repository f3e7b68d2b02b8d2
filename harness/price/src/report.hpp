#pragma once
/// \file report.hpp
/// What cm-price writes to results/<profile>/: the table (Markdown), CSV, JSON, the machine and
/// the provenance (command, commit).

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner.hpp"

namespace cm::price {

/// The machine, from /proc, uname and what the build recorded (compiler, library versions).
nlohmann::json machine_info(const std::filesystem::path& source_dir);

/// HEAD of the repository and whether the tree had changes ("dirty") when the run started.
nlohmann::json commit_info(const std::filesystem::path& source_dir);

/// argv as one shell-quoted line.
std::string shell_command(int argc, char** argv);

/// One row as the JSON and CSV carry it.
nlohmann::json row_json(const RowResult& row);

/// The Markdown table of every priced row (no notes), as printed on stdout.
std::string markdown_table(const std::vector<TargetResult>& targets);

/// results.md: title, the table, notes, validation, conditions, command and commit.
std::string markdown_report(const nlohmann::json& meta, const std::vector<TargetResult>& targets,
                            const std::vector<std::string>& skipped);

/// machine.md from machine_info().
std::string machine_markdown(const nlohmann::json& machine);

/// results.csv: one line per row, a header first.
std::string csv_report(const std::vector<TargetResult>& targets);

/// results.json: {meta, targets: [{server, variant, priced, refused, validation, rows}], skipped}.
nlohmann::json json_report(const nlohmann::json& meta, const std::vector<TargetResult>& targets,
                           const std::vector<std::string>& skipped);

}  // namespace cm::price
