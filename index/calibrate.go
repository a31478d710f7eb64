package index

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Score calibration.
//
// Hit.Score is 100·raw/(raw+k) with one k per index. k comes from probes:
// a fixed-size, insertion-order-independent sample of docs (the probeSize
// smallest FNV hashes of their IDs), each with a query text — its first
// representative query, else the opening words of its description, else its
// display name. k is kFactor times the median raw score of the top hit of
// those probes, so a hit as strong as a typical doc's answer to its own
// typical query scores 80, half as strong 67, a tenth as strong 29.
//
// Writes only mark k stale; the next Search recomputes it when the doc
// count moved by recalibrateShare or recalibrateAfter has passed, so bulk
// loads do not pay for it batch by batch. The probe sample is stored in
// the index (SetInternal, in the same batch as the docs) so a reopened
// index calibrates the same way without a rebuild.
const (
	probeSize         = 64
	probeWords        = 8
	kFactor           = 0.25
	defaultK          = 1.0 // until an index holds any probe
	recalibrateShare  = 0.05
	recalibrateAfter  = 30 * time.Second
	calibrateDeadline = 2 * time.Second
)

// calibration is one computed scale.
type calibration struct {
	k    float64
	gen  uint64
	docs uint64
	at   time.Time
}

// scale returns the current k, recomputing it when stale. Only one
// goroutine recomputes; the others keep using the previous value.
func (ix *Index) scale(ctx context.Context) float64 {
	c := ix.cal.Load()
	gen := ix.gen.Load()
	if c != nil && c.gen == gen {
		return c.k
	}
	if c == nil {
		ix.calMu.Lock() // first search: everyone waits for a real k
	} else if !ix.calMu.TryLock() {
		return c.k
	}
	defer ix.calMu.Unlock()
	if cur := ix.cal.Load(); cur != nil {
		if cur.gen == gen {
			return cur.k
		}
		if !ix.stale(cur) {
			// Small change: keep k, remember we looked at this generation.
			next := *cur
			next.gen = gen
			ix.cal.Store(&next)
			return cur.k
		}
	}
	nc := ix.calibrate(context.WithoutCancel(ctx), gen)
	ix.cal.Store(nc)
	return nc.k
}

// stale reports whether c should be recomputed after writes.
func (ix *Index) stale(c *calibration) bool {
	if time.Since(c.at) >= recalibrateAfter {
		return true
	}
	n, err := ix.bleve.DocCount()
	if err != nil {
		return true
	}
	return math.Abs(float64(n)-float64(c.docs)) > recalibrateShare*float64(max(c.docs, 1))
}

// calibrate runs the probes and derives k.
func (ix *Index) calibrate(ctx context.Context, gen uint64) *calibration {
	ctx, cancel := context.WithTimeout(ctx, calibrateDeadline)
	defer cancel()
	ix.writeMu.Lock()
	texts := ix.probes.texts()
	ix.writeMu.Unlock()
	docs, _ := ix.bleve.DocCount()

	tops := make([]float64, 0, len(texts))
	if r, rgen, err := ix.snapshot(); err == nil {
		for _, t := range texts {
			p, err := ix.textQuery(ctx, r, rgen, t)
			if err != nil {
				break
			}
			if len(p.terms) == 0 {
				continue
			}
			hits, _, err := ix.rankText(ctx, r, matched{text: &p}, 1, false, noCut)
			if err != nil {
				break
			}
			if len(hits) > 0 && hits[0].Raw > 0 {
				tops = append(tops, hits[0].Raw)
			}
		}
		_ = r.Close()
	}
	k := defaultK
	if len(tops) > 0 {
		slices.Sort(tops)
		k = kFactor * tops[len(tops)/2]
	}
	ix.log.Debug("index: calibrated score scale", "k", k, "probes", len(tops), "docs", docs)
	return &calibration{k: k, gen: gen, docs: docs, at: time.Now()}
}

// probeText is the query text a doc contributes to calibration.
func probeText(d *Doc) string {
	for _, q := range d.Queries {
		if q = strings.TrimSpace(q); q != "" {
			return q
		}
	}
	if w := strings.Fields(d.Description); len(w) > 0 {
		return strings.Join(w[:min(len(w), probeWords)], " ")
	}
	if s := strings.TrimSpace(d.DisplayName); s != "" {
		return s
	}
	return strings.TrimSpace(d.Name)
}

// probe is one calibration probe.
type probe struct {
	Hash uint64 `json:"h"`
	ID   string `json:"id"`
	Text string `json:"t"`
}

// probeSample holds the probes of the probeSize docs with the smallest ID
// hashes. After deletes it may hold fewer until new docs arrive; that only
// makes calibration coarser.
type probeSample struct {
	items []probe // sorted by Hash
}

func hashID(id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return h.Sum64()
}

// offer considers a put doc for the sample and reports whether the sample
// changed.
func (p *probeSample) offer(id, text string) bool {
	h := hashID(id)
	i := sort.Search(len(p.items), func(i int) bool {
		return p.items[i].Hash > h || (p.items[i].Hash == h && p.items[i].ID >= id)
	})
	if i < len(p.items) && p.items[i].ID == id {
		if text == "" {
			p.items = slices.Delete(p.items, i, i+1)
			return true
		}
		if p.items[i].Text == text {
			return false
		}
		p.items[i].Text = text
		return true
	}
	if text == "" || (len(p.items) >= probeSize && i >= len(p.items)) {
		return false
	}
	p.items = slices.Insert(p.items, i, probe{Hash: h, ID: id, Text: text})
	if len(p.items) > probeSize {
		p.items = p.items[:probeSize]
	}
	return true
}

// remove drops a deleted doc and reports whether the sample changed.
func (p *probeSample) remove(id string) bool {
	i := slices.IndexFunc(p.items, func(x probe) bool { return x.ID == id })
	if i < 0 {
		return false
	}
	p.items = slices.Delete(p.items, i, i+1)
	return true
}

func (p *probeSample) texts() []string {
	out := make([]string, len(p.items))
	for i, x := range p.items {
		out[i] = x.Text
	}
	return out
}

func (p *probeSample) encode() []byte {
	b, _ := json.Marshal(p.items) // plain structs: cannot fail
	return b
}

// decodeProbeSample reads a stored sample; a missing or unreadable one
// starts empty (it only affects calibration, and refills on the next puts).
func decodeProbeSample(b []byte) *probeSample {
	p := &probeSample{}
	if len(b) > 0 && json.Unmarshal(b, &p.items) == nil {
		slices.SortFunc(p.items, func(a, b probe) int {
			if a.Hash != b.Hash {
				if a.Hash < b.Hash {
					return -1
				}
				return 1
			}
			return strings.Compare(a.ID, b.ID)
		})
		if len(p.items) > probeSize {
			p.items = p.items[:probeSize]
		}
	}
	return p
}
