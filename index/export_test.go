package index

// SetBlockDocs makes ix's ranker work in blocks of n doc numbers (see
// Index.blockDocs), so that tests over a few thousand docs see pruning.
func SetBlockDocs(ix *Index, n int) { ix.blockDocs = n }

// SetSplit makes ix split every ranking into n ranges (Index.split), or
// fewer when it spans fewer blocks; 1 never splits.
func SetSplit(ix *Index, n int) { ix.split = n }
