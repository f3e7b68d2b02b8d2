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

/// One round of one row as the JSON and CSV carry it.
nlohmann::json row_json(const RowResult& round);

/// One row over its rounds: the summary (median, min, max and spread of each figure), the ratios
/// to the peers taken within a round, the flags and notes, and every round (row_json).
nlohmann::json row_rounds_json(const RowRounds& row, const TargetResult& self,
                               const std::vector<TargetResult>& targets);

/// The compact table that opens results.md (issue 15), as printed on stdout: model, row, rps
/// (median, min-max), the binding ceiling, efficiency, p99 latency, errors, starved connections.
std::string compact_table(const std::vector<TargetResult>& targets);

/// The full Markdown table of every priced row (no notes), medians over the rounds.
std::string markdown_table(const std::vector<TargetResult>& targets);

/// results.md: title, the compact table, the full table, notes, validation, conditions, command
/// and commit.
std::string markdown_report(const nlohmann::json& meta, const std::vector<TargetResult>& targets,
                            const std::vector<std::string>& skipped);

/// machine.md from machine_info().
std::string machine_markdown(const nlohmann::json& machine);

/// results.csv: one line per round of each row, a header first.
std::string csv_report(const std::vector<TargetResult>& targets);

/// results.json: {meta, targets: [{server, variant, priced, refused, validation, rows: [
/// row_rounds_json]}], skipped}.
nlohmann::json json_report(const nlohmann::json& meta, const std::vector<TargetResult>& targets,
                           const std::vector<std::string>& skipped);

}  // namespace cm::price
