package sources

import (
	"fmt"
	"strings"
)

// maxParentCapabilities bounds the operationIds listed on the parent entry.
const maxParentCapabilities = 100

// APIData is the inline data of the parent entry when the description has
// no fetchable URL (it was read from a file).
type APIData struct {
	OpenAPI    string   `json:"openapi"` // spec version
	Title      string   `json:"title,omitempty"`
	Servers    []string `json:"servers,omitempty"`
	Operations int      `json:"operations"`
}

// OperationData is the inline data of an operation entry
// (TypeOpenAPIOperation): everything a caller needs to call it.
type OperationData struct {
	Method      string   `json:"method"`
	Path        string   `json:"path"`
	Servers     []string `json:"servers"`
	OperationID string   `json:"operationId,omitempty"`
	Summary     string   `json:"summary,omitempty"`
	// Auth is the first alternative's first scheme: what most callers
	// need. AuthAlternatives carries the whole requirement when there is
	// more than that one scheme.
	Auth             AuthScheme     `json:"auth"`
	AuthAlternatives [][]AuthScheme `json:"authAlternatives,omitempty"`
	Parameters       []Parameter    `json:"parameters,omitempty"`
	RequestBody      *RequestBody   `json:"requestBody,omitempty"`
	Deprecated       bool           `json:"deprecated,omitempty"`
	OpenAPI          string         `json:"openapi,omitempty"` // URL of the description
	API              string         `json:"api"`               // identifier of the parent entry
}

// APIEntries turns a parsed description into entries: the API itself
// (TypeOpenAPI) first, then one TypeOpenAPIOperation entry per operation,
// identified urn:air:<domain>:api:<operationId or method-path slug>. domain
// anchors the identifiers; empty means the host of the document URL.
func APIEntries(api *API, domain string, prov Provenance) (*Result, error) {
	if domain == "" {
		domain = domainOf(firstNonEmpty(prov.URL, api.DocumentURL))
	}
	d, ok := normalizeDomain(domain)
	if !ok {
		return nil, fmt.Errorf("sources: %q cannot anchor an identifier (a fully qualified domain name is needed)", domain)
	}
	res := &Result{Warnings: append([]string(nil), api.Warnings...)}
	ids := idSet{}
	meta := func() map[string]any {
		m := prov.metadata("openapi")
		m["openapi.version"] = api.SpecVersion
		return m
	}

	parent := Entry{
		Identifier:  ids.unique("urn:air:"+d+":openapi:", firstNonEmpty(slug(api.Title), "api")),
		DisplayName: firstNonEmpty(api.Title, d+" API"),
		Type:        TypeOpenAPI,
		Description: clip(firstNonEmpty(api.Description, api.Summary), maxDescriptionLen),
		Version:     api.Version,
		Metadata:    meta(),
	}
	docURL := firstNonEmpty(prov.URL, api.DocumentURL)
	if isHTTPURL(docURL) {
		parent.URL = docURL
	} else {
		docURL = ""
		parent.Data = &APIData{OpenAPI: api.SpecVersion, Title: api.Title, Servers: api.Servers, Operations: len(api.Operations)}
	}
	var allTags []string
	allTags = append(allTags, api.Tags...)
	for _, op := range api.Operations {
		allTags = append(allTags, op.Tags...)
		if op.OperationID != "" && len(parent.Capabilities) < maxParentCapabilities {
			parent.Capabilities = append(parent.Capabilities, op.OperationID)
		}
	}
	parent.Tags = dedupeStrings(allTags)
	parent.Capabilities = dedupeStrings(parent.Capabilities)
	parent.Metadata["operationCount"] = len(api.Operations)
	qs := []string{api.Title, api.Summary, firstSentence(api.Description)}
	parent.RepresentativeQueries = queries(append(qs, parent.Tags...)...)
	res.Entries = append(res.Entries, parent)
	warnQueries(res, parent)

	for _, op := range api.Operations {
		name := slug(op.OperationID)
		if name == "" {
			name = slug(strings.ToLower(op.Method) + "-" + op.Path)
		}
		data := &OperationData{
			Method:      op.Method,
			Path:        op.Path,
			Servers:     op.Servers,
			OperationID: op.OperationID,
			Summary:     op.Summary,
			Parameters:  op.Parameters,
			RequestBody: op.RequestBody,
			Deprecated:  op.Deprecated,
			OpenAPI:     docURL,
			API:         parent.Identifier,
		}
		if data.Servers == nil {
			data.Servers = []string{}
		}
		data.Auth = AuthScheme{Type: "none"}
		if len(op.Auth) > 0 && len(op.Auth[0]) > 0 {
			data.Auth = op.Auth[0][0]
		}
		if len(op.Auth) > 1 || len(op.Auth) == 1 && len(op.Auth[0]) > 1 {
			data.AuthAlternatives = op.Auth
		}
		e := Entry{
			Identifier:  ids.unique("urn:air:"+d+":api:", name),
			DisplayName: firstNonEmpty(op.Summary, op.OperationID, op.Method+" "+op.Path),
			Type:        TypeOpenAPIOperation,
			Data:        data,
			Description: clip(firstNonEmpty(op.Description, op.Summary), maxDescriptionLen),
			Version:     api.Version,
			Tags:        op.Tags,
			Metadata:    meta(),
		}
		if op.OperationID != "" {
			e.Capabilities = []string{op.OperationID}
		}
		e.Metadata["auth"] = data.Auth.Type
		if op.Deprecated {
			e.Metadata["deprecated"] = true
		}
		e.RepresentativeQueries = queries(append([]string{op.Summary, firstSentence(op.Description)}, op.Tags...)...)
		res.Entries = append(res.Entries, e)
		warnQueries(res, e)
	}
	return res, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

func isHTTPURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}
