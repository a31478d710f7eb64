// Package ingest owns how entries get into the registry: reading ARD
// manifests (v0.91 ard.json and v0.9 ai-catalog.json) from files,
// directories, embedded file systems, URLs and bare domains; validating and
// normalising each entry (identifier, media type, the shape of every optional
// member); rejecting squatted publishers for web sources; storing each
// source's entries as one replace-by-source transaction in kv; and keeping
// the Bleve index in step with what kv holds (ToDoc, Reindex).
//
// It also owns crawling publishers (Crawl, Discover, StartRecrawl): finding
// a domain's manifest by the ARD v0.91 discovery mechanisms, reading the API
// descriptions, MCP servers and llms.txt it publishes (through
// registry/sources) so that every API operation and MCP tool becomes an
// entry of its own, politely (one request at a time per host, conditional
// requests from kv's fetch cache), with each re-crawl's differences as
// change events and a tool.changed event when an MCP tool's description
// hash changes.
//
// ParseManifest is the one validator of a manifest document; the doctor
// reuses it so that what ingestion rejects and what the doctor reports never
// drift apart.
package ingest
