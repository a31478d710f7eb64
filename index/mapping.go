package index

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/mapping"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// schemaVersion changes whenever toDocument or the query side changes what a
// field holds; together with the mapping JSON it forms the stored mapping
// version, and any difference makes Open discard and rebuild the index.
const schemaVersion = "ardx-index-7" // 4: benchmark queries held out; payment fields (two branches both said 4); 5: both; 6: word pairs; 7: words as written

// Index field names. Filter and facet keys are the field names themselves,
// so a key maps to a field with no translation table.
const (
	fieldName   = "name"   // text: URN name segment and display name
	fieldSearch = "search" // text: every other searchable text, weighted (weight* constants)
	fieldPairs  = "pairs"  // keyword: adjacent word pairs, frequency pairInName/pairInText (pairs.go)
	fieldExact  = "exact"  // keyword: the words of the text fields as written, lower-cased (exact.go)

	fieldType         = "type"
	fieldTags         = "tags"
	fieldCapabilities = "capabilities"
	fieldPublisher    = "publisher"
	fieldVersion      = "version"
	fieldAttestation  = "trustManifest.attestations.type"
	fieldIdentityType = "trustManifest.identityType"
	metadataPrefix    = "metadata."

	fieldOwner      = "owner"           // keyword: the owning domain, private docs only
	fieldPrivate    = "private"         // keyword: privateMarker on private docs only
	fieldSortName   = "displayNameSort" // keyword: lower-cased display name
	fieldCreatedAt  = "createdAt"       // keyword: fixed-width UTC timestamp
	fieldUpdatedAt  = "updatedAt"       // keyword: fixed-width UTC timestamp
	fieldIdentifier = "_id"             // bleve's own document id field
)

// privateMarker is the one value of fieldPrivate. Only private docs carry
// the owner and private fields, so visibility is a must-not over the (few)
// private docs rather than a filter every public doc has to pass.
const privateMarker = "1"

// timeLayout renders timestamps fixed-width in UTC, so lexical order is time
// order and sort keys handed out as page tokens are readable text.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// keywordFields are the exact-match fields usable as filter keys and facet
// fields (metadata.<key> is handled apart).
var keywordFields = []string{
	fieldType, fieldPublisher, fieldTags, fieldCapabilities, fieldVersion,
	fieldIdentityType, fieldAttestation,
}

// textFields lists the full-text fields and their BM25F weights (applied at
// query time: bleve has no index-time boost). The name is short and chosen
// by the publisher, so a hit there says most, and it keeps a field of its
// own: its own length norm (pivot 1 token against the text's 4) is what
// makes a name hit stand out, and on top of it a weight of 2 cost requests
// that do not name what they need more than it gained (folding it
// into fieldSearch with a weight saturated the term frequency and cost
// relevance); a term's weighted frequencies in both fields saturate once
// (rank.go), so a word in the name and the description counts little more
// than in either. Everything else shares fieldSearch, so a query term is two
// posting lists rather than a disjunction over five fields, which cost most
// of a query's time.
//
// pivot is the length, in tokens, at which BM25F's length norm is 1 (its
// avgLen): a constant, not a statistic of the index. Bleve's field
// cardinality, which its BM25 divides by N for an average length, counts
// the distinct terms of each segment's dictionary, so the quotient moved
// with how segments happened to be merged (at 100k entries 1 and 2 merged,
// 2 and 4 in a hundred segments) and the ranking with it; the fields' true
// average lengths (8-25 tokens) made every set worse, since the tuning had
// grown up under those small values. A constant, a ranking is the same in
// memory and on disk, before a merge and after. The text's is 4 tokens,
// not the 2 the merged index gave: at 2 a description of 25 tokens weighed
// a word a ninth of what a one-word name does, so an entry whose
// description answers a request that does not name it lost to short
// entries sharing one word with it (docs/decisions.md).
var textFields = []struct {
	name  string
	boost float64
	pivot float64
}{
	{fieldName, 1, 1},
	{fieldSearch, 1, 4},
}

// Weights within fieldSearch. A source's weight multiplies the frequencies
// of its terms, as BM25F does; the field length counts every token once, so
// a long description dilutes a doc but a weighted keyword does not
// (weighting the length too measured worse). Tags, capabilities and the
// publisher are curated keywords and representative queries curated
// retrieval text; descriptions are long and chatty; Doc.Text (operation
// paths, tool names) is the noisiest and, integer weights being all there
// is, counts like the description.
const (
	weightKeywords    = 2
	weightQueries     = 2
	weightDescription = 1
	weightText        = 1
)

// Indexing options: text fields are indexed only (kv holds the bodies and
// BM25 needs no term vectors); keyword fields keep doc values for facets
// and sorting.
const (
	textOptions    = bleveindex.IndexField
	keywordOptions = bleveindex.IndexField | bleveindex.DocValues
	filterOptions  = bleveindex.IndexField
)

// newMapping builds the index mapping. Documents are built by toDocument and
// added with IndexAdvanced, so the mapping carries no field mappings: it
// holds the scoring model, the analyzers, and disables dynamic indexing so
// nothing ever enters the index by accident.
func newMapping() (*mapping.IndexMappingImpl, error) {
	im := bleve.NewIndexMapping()
	im.ScoringModel = bleveindex.BM25Scoring
	if err := im.AddCustomAnalyzer(textAnalyzerName, textAnalyzerConfig); err != nil {
		return nil, fmt.Errorf("index: analyzer: %w", err)
	}
	dm := bleve.NewDocumentStaticMapping()
	im.DefaultMapping = dm
	im.DefaultAnalyzer = textAnalyzerName
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	return im, nil
}

// mappingVersion identifies this build's mapping and document schema.
func mappingVersion(im mapping.IndexMapping) (string, error) {
	b, err := json.Marshal(im)
	if err != nil {
		return "", fmt.Errorf("index: encode mapping: %w", err)
	}
	sum := sha256.Sum256(append([]byte(schemaVersion+"\n"), b...))
	return schemaVersion + "-" + hex.EncodeToString(sum[:8]), nil
}

// analyzers are the resolved analyzers of one open index.
type analyzers struct {
	text    analysis.Analyzer
	keyword analysis.Analyzer
}

func resolveAnalyzers(im mapping.IndexMapping) (analyzers, error) {
	t := im.AnalyzerNamed(textAnalyzerName)
	k := im.AnalyzerNamed(keyword.Name)
	if t == nil || k == nil {
		return analyzers{}, fmt.Errorf("index: analyzers missing from mapping")
	}
	return analyzers{text: t, keyword: k}, nil
}

// Value normalisation. Keyword fields are case-sensitive in bleve, so the
// fields users type free-hand (type, tags, capabilities, publisher domain)
// and the owner domain are lower-cased on both the index and the query side. Versions, metadata
// values and trust-manifest values are exact.
func normaliseValue(field, v string) string {
	v = strings.TrimSpace(v)
	switch field {
	case fieldType, fieldTags, fieldCapabilities, fieldPublisher, fieldOwner, FieldPayProtocol, FieldPayNetwork, FieldPayVerified:
		return strings.ToLower(v)
	}
	return v
}

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// sortName is the listing sort key: the lower-cased display name, falling
// back to the name and then the identifier so every doc has one.
func sortName(d *Doc) string {
	s := strings.TrimSpace(d.DisplayName)
	if s == "" {
		s = strings.TrimSpace(d.Name)
	}
	if s == "" {
		s = d.ID
	}
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// toDocument builds the bleve document of d.
func (a analyzers) toDocument(d *Doc) *document.Document {
	doc := document.NewDocument(d.ID)
	text := func(field string, weight int, values ...string) {
		for _, v := range values {
			if strings.TrimSpace(v) == "" {
				continue
			}
			f := document.NewTextFieldCustom(field, nil, []byte(v), textOptions, a.text)
			if weight == 1 {
				doc.AddField(f)
			} else {
				doc.AddField(&weightedText{TextField: f, weight: weight})
			}
		}
	}
	kw := func(field string, opts bleveindex.FieldIndexingOptions, values ...string) {
		seen := make(map[string]bool, len(values))
		for _, v := range values {
			v = normaliseValue(field, v)
			if v == "" || seen[v] {
				continue
			}
			seen[v] = true
			doc.AddField(document.NewTextFieldCustom(field, nil, []byte(v), opts, a.keyword))
		}
	}

	text(fieldName, 1, d.Name, d.DisplayName)
	text(fieldSearch, weightDescription, d.Description)
	text(fieldSearch, weightKeywords, d.Tags...)
	text(fieldSearch, weightKeywords, d.Capabilities...)
	text(fieldSearch, weightKeywords, d.Publisher)
	text(fieldSearch, weightQueries, d.Queries...)
	text(fieldSearch, weightText, d.Text...)

	kw(fieldType, keywordOptions, d.Type)
	kw(fieldTags, keywordOptions, d.Tags...)
	kw(fieldCapabilities, keywordOptions, d.Capabilities...)
	kw(fieldPublisher, keywordOptions, d.Publisher)
	kw(fieldVersion, keywordOptions, d.Version)
	kw(fieldAttestation, keywordOptions, d.AttestationTypes...)
	kw(fieldIdentityType, keywordOptions, d.IdentityType)
	for k, v := range d.Metadata {
		if k = strings.TrimSpace(k); k != "" {
			kw(metadataPrefix+k, keywordOptions, v)
		}
	}

	payDocument(d, kw)

	if owner := strings.TrimSpace(d.Owner); owner != "" {
		kw(fieldOwner, filterOptions, owner)
		kw(fieldPrivate, filterOptions, privateMarker)
	}
	for _, p := range a.pairs(d) {
		f := document.NewTextFieldCustom(fieldPairs, nil, []byte(p.pair), filterOptions, a.keyword)
		doc.AddField(&weightedText{TextField: f, weight: p.freq})
	}
	for _, w := range exactWordsOf(d) {
		doc.AddField(document.NewTextFieldCustom(fieldExact, nil, []byte(w), filterOptions, a.keyword))
	}
	kw(fieldSortName, keywordOptions, sortName(d))
	kw(fieldCreatedAt, keywordOptions, formatTime(d.CreatedAt))
	kw(fieldUpdatedAt, keywordOptions, formatTime(d.UpdatedAt))
	return doc
}

// weightedText is a text field whose analysed term frequencies count weight
// times. Scorch merges every field of one name in a document (frequencies
// and lengths add up), so the weighted pieces of fieldSearch form one
// posting per term and one length norm per doc.
type weightedText struct {
	*document.TextField
	weight int
}

// Analyze implements index.Field: it analyses once and scales the result.
func (w *weightedText) Analyze() {
	w.TextField.Analyze()
	for _, tf := range w.AnalyzedTokenFrequencies() {
		tf.SetFrequency(tf.Frequency() * w.weight)
	}
}
