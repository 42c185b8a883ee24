#pragma once
// Writing HTML and SVG from text that came from elsewhere (a metrics file, a checkpoint's
// vocabulary, the user's prompt): everything is escaped on the way in, so a value can never
// become markup, end a script or reorder what a reader sees.
//
//   out += "<td>" + report::html::escape(run_name) + "</td>";
//   out += "<td title=\"" + report::html::escape(path) + "\">";  // attributes alike
//   out += "<script type=\"application/json\">" + report::html::script_json(data) + "</script>";
//   csp += "script-src '" + report::html::csp_hash(script) + "'";  // only that script runs
//
// The report page (report.h) and the attention heat maps are built from these, and from
// line_chart.h and heat_map.h.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace report::html {

// Text as HTML text or as a double- or single-quoted attribute value: first made printable
// as base::printable does it (control characters, bidirectional overrides and bytes that
// are not UTF-8 become visible escapes such as \x1b, \u{202e}, \xff), then & < > " ' become
// character references. With keep_line_breaks, newlines and tabs pass (for <pre>).
std::string escape(std::string_view text, bool keep_line_breaks = false);

// A JSON value to embed inside <script type="application/json">: ASCII only (every other
// character, U+2028 and U+2029 included, as \u escapes) and < > & written \u003c \u003e
// \u0026, so that no string in it can close the element or open a comment. Strings that
// are not UTF-8 have their bad bytes replaced by U+FFFD. JSON.parse reads it back exactly.
std::string script_json(const nlohmann::json& value);

// "sha256-<base64>" of the bytes: the source of a Content-Security-Policy that lets exactly
// that inline script (or style element) run, and nothing else.
std::string csp_hash(std::string_view bytes);

// A number for SVG coordinates and attribute values: fixed, at most `decimals` decimals,
// trailing zeros and a trailing point dropped, never "-0" ("12.5", "3", "-0.25").
std::string num(double value, int decimals = 1);

}  // namespace report::html
