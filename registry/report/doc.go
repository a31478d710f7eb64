// Package report owns the publisher reports of the registry: the daily
// demand rollups kept beside the demand log, and the reports built from
// them and from the index (demand, analytics, insights, adoption), plus the
// third-party figures (usage, web position) read through configurable
// providers. It knows nothing of HTTP: registry/ serves its results.
//
// Nothing here identifies who asked: a rollup counts what was asked and at
// which rank entries came back, per publisher domain, entry and UTC day.
// Private entries are never counted.
package report
