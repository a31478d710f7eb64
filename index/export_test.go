package index

// SetBlockDocs makes ix's ranker work in blocks of n doc numbers (see
// Index.blockDocs), so that tests over a few thousand docs see pruning.
func SetBlockDocs(ix *Index, n int) { ix.blockDocs = n }

// SetCores makes ix split a ranking as if it had n cores (Index.cores):
// 1 never splits.
func SetCores(ix *Index, n int) { ix.cores = n }
