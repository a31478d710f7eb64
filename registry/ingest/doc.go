// Package ingest owns how entries get into the registry: reading ARD
// manifests (v0.91 ard.json and v0.9 ai-catalog.json) from files,
// directories, embedded file systems, URLs and bare domains; validating and
// normalising each entry (identifier, media type, the shape of every optional
// member); rejecting squatted publishers for web sources; storing each
// source's entries as one replace-by-source transaction in kv; and keeping
// the Bleve index in step with what kv holds (ToDoc, Reindex).
//
// ParseManifest is the one validator of a manifest document; the doctor
// reuses it so that what ingestion rejects and what the doctor reports never
// drift apart.
package ingest
