// Package sources owns reading what publishers already publish about
// themselves and turning it into ARD entries: OpenAPI 3.0/3.1 and Swagger
// 2.0 API descriptions (JSON or YAML), MCP server cards and the live tool
// list of an MCP server over Streamable HTTP (both the stateless
// 2026-07-28 handshake and the older initialize/session one), and llms.txt
// files.
//
// The parsers (ParseAPI, ParseServerCard, ParseLLMsTxt) are pure: bytes in,
// a typed description out. The *Entries functions turn a description into
// ARD entries, each citing in its metadata the fetch that produced it
// (source.url, source.fetchedAt, source.httpStatus, source.sha256), so a
// generated manifest shows where every entry came from. Reader does the
// fetching, always through the SSRF-safe web.Fetcher.
//
// The package does not store, index or validate manifests: ingestion
// (registry/ingest) and the manifest builder do that with what it returns.
// It deliberately does not import registry/ingest, so that ingest can
// import it; the media-type constants below repeat ingest's values.
package sources
