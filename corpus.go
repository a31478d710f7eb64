package main

import "embed"

// defaultCorpus holds the sample manifests indexed into an empty data dir,
// so a new user's first search answers.
//
//go:embed testdata/corpus
var defaultCorpus embed.FS
