// Package registry owns the HTTP surface of ardx's Agentic Resource Discovery
// registry: POST /search (with federation to upstream registries), POST
// /explore, GET /agents, GET /health, GET /stats and GET /openapi.json, and
// the demand log writer that records every answered search without anything
// that identifies the caller.
//
// Entries are read from kv (the truth) and ranked by index; ingestion lives
// in registry/ingest. Every route is listed in one place, routes().
package registry
