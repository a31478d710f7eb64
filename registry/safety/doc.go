// Package safety owns the deterministic scan of MCP tool descriptions for
// text that tells a model what to do: instructions addressed to the model,
// references to credentials, exfiltration sinks, references to other tools,
// hidden text and oversized descriptions. It also owns the description hash
// that lets a caller notice a tool whose description changed after it was
// first seen (a "rug pull"), and the aggregation that GET /tool-safety
// serves.
//
// # What it is not
//
// The scan counts and quotes; it never scores. There is no severity, no
// ranking and no badge, and nothing here may be mixed into search relevance:
// ARD forbids reading a relevance score as a safety verdict, and a lexical
// scanner is known to miss most semantic poisoning (MCPTox: a 60-rule regex
// scanner caught none of 485 poisoned descriptions), so presenting its output
// as a verdict would mislead. A finding is an excerpt a human can read.
//
// # Text surfaces
//
// Scan reads every place a tool can carry text a model will see: the name,
// the title, the description, the annotations' title, every string inside the
// input schema that describes or constrains a value (description, title,
// default, enum, const, examples, $comment; recursively through properties,
// items, anyOf/oneOf/allOf, $defs and the like) and the server's
// instructions. Property names are scanned for hidden text only: names such
// as api_key are ordinary parameters, not instructions.
//
// Matching runs on a normalised copy of each field: Unicode NFKC (so
// full-width and mathematical letters read as ASCII), lower case, common
// Cyrillic and Greek look-alikes mapped to Latin, invisible characters
// dropped and Unicode tag characters decoded to the ASCII they hide. Offsets
// and excerpts always refer to the original text. Every field is capped
// (MaxFieldBytes) and every pattern is an RE2 regular expression, so a scan
// is linear in its input.
//
// # Rules
//
// Each rule has a stable identifier (the Rule* constants) and a reason it
// exists, returned by Rules. The patterns are deliberately narrow: they were
// tightened against 8,010 public tool descriptions so that ordinary wording
// ("requires an API key", "send an email to a recipient", a documentation
// link) does not fire.
package safety
