package sources

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrNotAPIDescription means a document is neither OpenAPI 3.x nor Swagger
// 2.0.
var ErrNotAPIDescription = errors.New("not an OpenAPI 3.x or Swagger 2.0 description")

// maxOperations bounds how many operations one description yields.
const maxOperations = 2000

// httpMethods are the operation keys of a path item, in the order
// operations are emitted.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// API is a parsed API description.
type API struct {
	SpecVersion string // the document's "openapi" or "swagger" value: "3.1.0", "2.0"
	DocumentURL string // where it was read from; relative server URLs resolve against it
	Title       string
	Summary     string // info.summary (OpenAPI 3.1)
	Description string
	Version     string // info.version, the API's own version
	Servers     []string
	Tags        []string // names of the document's tags, in order
	Operations  []Operation
	Warnings    []string
}

// Operation is one callable operation.
type Operation struct {
	Method      string   // upper case
	Path        string   // as written in the document, with {templates}
	Servers     []string // absolute base URLs, variables substituted
	OperationID string
	Summary     string
	Description string
	Tags        []string
	Deprecated  bool
	Parameters  []Parameter
	RequestBody *RequestBody
	// Auth lists the alternative ways to authenticate: any one inner list
	// suffices, and every scheme of an inner list is needed. No
	// authentication is one alternative of one scheme of type "none".
	Auth [][]AuthScheme
}

// Parameter is one operation parameter.
type Parameter struct {
	Name     string `json:"name"`
	In       string `json:"in"` // path, query, header, cookie, formData
	Required bool   `json:"required,omitempty"`
}

// RequestBody is the body an operation accepts.
type RequestBody struct {
	ContentType string `json:"contentType,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Schema      any    `json:"schema,omitempty"` // local $refs inlined
}

// AuthScheme is one authentication scheme an operation requires.
type AuthScheme struct {
	Type             string   `json:"type"`                 // apiKey, http, oauth2, openIdConnect, mutualTLS, none, unknown
	SchemeName       string   `json:"schemeName,omitempty"` // the key in securitySchemes / securityDefinitions
	In               string   `json:"in,omitempty"`         // apiKey: header, query or cookie
	Name             string   `json:"name,omitempty"`       // apiKey: the header or parameter name
	Scheme           string   `json:"scheme,omitempty"`     // http: bearer, basic, digest (lower case)
	BearerFormat     string   `json:"bearerFormat,omitempty"`
	Flows            []string `json:"flows,omitempty"`  // oauth2 flows in OpenAPI 3 names, sorted
	Scopes           []string `json:"scopes,omitempty"` // scopes the operation asks for
	OpenIDConnectURL string   `json:"openIdConnectUrl,omitempty"`
}

// ParseAPI parses an OpenAPI 3.0/3.1 or Swagger 2.0 description in JSON or
// YAML. docURL is where the document was read from: relative server URLs
// and a Swagger document without host or schemes resolve against it.
func ParseAPI(body []byte, docURL string) (*API, error) {
	tree, err := decodeTree(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotAPIDescription, err)
	}
	root := obj(tree)
	if root == nil {
		return nil, fmt.Errorf("%w: not an object", ErrNotAPIDescription)
	}
	api := &API{DocumentURL: docURL}
	var swagger bool
	switch {
	case strings.HasPrefix(str(root, "openapi"), "3."):
		api.SpecVersion = str(root, "openapi")
	case str(root, "swagger") == "2.0":
		api.SpecVersion, swagger = "2.0", true
	default:
		return nil, fmt.Errorf("%w: no \"openapi: 3.x\" or \"swagger: 2.0\" member", ErrNotAPIDescription)
	}
	info := obj(root["info"])
	api.Title = collapseSpace(str(info, "title"))
	api.Summary = collapseSpace(str(info, "summary"))
	api.Description = strings.TrimSpace(str(info, "description"))
	api.Version = str(info, "version")
	for _, t := range arr(root["tags"]) {
		if n := str(obj(t), "name"); n != "" {
			api.Tags = append(api.Tags, n)
		}
	}
	p := &apiParser{root: root, api: api, swagger: swagger}
	if swagger {
		api.Servers = p.swaggerServers(root, nil)
	} else {
		api.Servers = p.servers(root["servers"], nil)
	}
	globalSecurity, hasGlobal := root["security"]
	paths := obj(root["paths"])
	for _, path := range sortedKeys(paths) {
		item := deref(root, paths[path])
		if item == nil {
			continue
		}
		pathServers := api.Servers
		if !swagger {
			if _, ok := item["servers"]; ok {
				pathServers = p.servers(item["servers"], api.Servers)
			}
		}
		for _, method := range httpMethods {
			raw := obj(item[method])
			if raw == nil {
				continue
			}
			if len(api.Operations) == maxOperations {
				api.Warnings = append(api.Warnings, fmt.Sprintf("more than %d operations; the rest were skipped", maxOperations))
				return api, nil
			}
			op := Operation{
				Method:      strings.ToUpper(method),
				Path:        path,
				OperationID: strings.TrimSpace(str(raw, "operationId")),
				Summary:     collapseSpace(str(raw, "summary")),
				Description: strings.TrimSpace(str(raw, "description")),
				Tags:        dedupeStrings(stringList(raw["tags"])),
				Deprecated:  boolean(raw, "deprecated"),
			}
			switch {
			case swagger:
				op.Servers = p.swaggerServers(root, raw["schemes"])
			case raw["servers"] != nil:
				op.Servers = p.servers(raw["servers"], pathServers)
			default:
				op.Servers = pathServers
			}
			op.Parameters, op.RequestBody = p.parameters(item["parameters"], raw["parameters"])
			if !swagger {
				op.RequestBody = p.requestBody(raw["requestBody"])
			} else if op.RequestBody != nil {
				op.RequestBody.ContentType = swaggerConsumes(root, raw)
			}
			if sec, ok := raw["security"]; ok {
				op.Auth = p.auth(sec)
			} else if hasGlobal {
				op.Auth = p.auth(globalSecurity)
			} else {
				op.Auth = [][]AuthScheme{{{Type: "none"}}}
			}
			api.Operations = append(api.Operations, op)
		}
	}
	return api, nil
}

type apiParser struct {
	root    map[string]any
	api     *API
	swagger bool
}

func (p *apiParser) warn(format string, args ...any) {
	p.api.Warnings = append(p.api.Warnings, fmt.Sprintf(format, args...))
}

// servers reads an OpenAPI 3 servers array: variables take their defaults,
// relative URLs resolve against the document URL. An absent or empty array
// means inherit (fallback), and at the top level the single server "/".
func (p *apiParser) servers(v any, fallback []string) []string {
	list := arr(v)
	if len(list) == 0 {
		if fallback != nil {
			return fallback
		}
		list = []any{map[string]any{"url": "/"}}
	}
	var out []string
	for _, s := range list {
		m := obj(s)
		raw := str(m, "url")
		if raw == "" {
			continue
		}
		vars := obj(m["variables"])
		for _, name := range sortedKeys(vars) {
			def := str(obj(vars[name]), "default")
			if def == "" {
				// OpenAPI requires a default; an enum's first value is what a
				// client would most likely pick without one.
				if enum := arr(obj(vars[name])["enum"]); len(enum) > 0 {
					def = scalarText(enum[0])
				}
			}
			raw = strings.ReplaceAll(raw, "{"+name+"}", def)
		}
		if strings.ContainsAny(raw, "{}") {
			p.warn("server %q has a variable without a default; skipped", raw)
			continue
		}
		abs, err := resolveURL(p.api.DocumentURL, raw)
		if err != nil {
			p.warn("server %q: %v", raw, err)
			continue
		}
		out = append(out, abs)
	}
	return dedupeStrings(out)
}

// swaggerServers builds Swagger 2.0 base URLs from schemes, host and
// basePath; the document URL supplies what the document leaves out, as the
// Swagger 2.0 specification says.
func (p *apiParser) swaggerServers(root map[string]any, opSchemes any) []string {
	doc, _ := url.Parse(p.api.DocumentURL)
	host := str(root, "host")
	if host == "" && doc != nil {
		host = doc.Host
	}
	if host == "" {
		return nil
	}
	basePath := str(root, "basePath")
	if basePath == "" || basePath[0] != '/' {
		basePath = "/" + basePath
	}
	schemes := stringList(opSchemes)
	if len(schemes) == 0 {
		schemes = stringList(root["schemes"])
	}
	if len(schemes) == 0 {
		s := "https"
		if doc != nil && doc.Scheme != "" {
			s = doc.Scheme
		}
		schemes = []string{s}
	}
	var out []string
	for _, s := range schemes {
		s = strings.ToLower(s)
		if s != "http" && s != "https" {
			continue // ws/wss: not a base URL for HTTP operations
		}
		out = append(out, strings.TrimSuffix(s+"://"+host+basePath, "/"))
	}
	return dedupeStrings(out)
}

// resolveURL makes raw absolute against base, without a trailing slash.
func resolveURL(base, raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", err
	}
	if !u.IsAbs() {
		b, err := url.Parse(base)
		if err != nil || !b.IsAbs() {
			return "", fmt.Errorf("relative URL and no absolute document URL to resolve it against")
		}
		u = b.ResolveReference(u)
	}
	if u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("not an http(s) URL with a host")
	}
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimSuffix(u.String(), "/"), nil
}

// parameters merges path-level and operation-level parameters (the
// operation's win on the same name and location) and returns a Swagger
// body parameter as the request body.
func (p *apiParser) parameters(pathLevel, opLevel any) ([]Parameter, *RequestBody) {
	var out []Parameter
	var body *RequestBody
	index := map[string]int{}
	add := func(list any) {
		for _, raw := range arr(list) {
			m := deref(p.root, raw)
			if m == nil {
				if ref := str(obj(raw), "$ref"); ref != "" {
					p.warn("parameter $ref %q does not resolve within the document", ref)
				}
				continue
			}
			name, in := str(m, "name"), str(m, "in")
			if name == "" || in == "" {
				continue
			}
			if in == "body" {
				body = &RequestBody{Required: boolean(m, "required"), Schema: resolveSchema(p.root, m["schema"])}
				continue
			}
			prm := Parameter{Name: name, In: in, Required: boolean(m, "required") || in == "path"}
			key := in + "\x00" + name
			if i, ok := index[key]; ok {
				out[i] = prm
				continue
			}
			index[key] = len(out)
			out = append(out, prm)
		}
	}
	add(pathLevel)
	add(opLevel)
	return out, body
}

// requestBody reads an OpenAPI 3 requestBody, choosing JSON when offered.
func (p *apiParser) requestBody(v any) *RequestBody {
	m := deref(p.root, v)
	if m == nil {
		return nil
	}
	content := obj(m["content"])
	if len(content) == 0 {
		return nil
	}
	ct := pickContentType(sortedKeys(content))
	return &RequestBody{
		ContentType: ct,
		Required:    boolean(m, "required"),
		Schema:      resolveSchema(p.root, obj(content[ct])["schema"]),
	}
}

// pickContentType prefers application/json, then any +json type, then the
// first in sorted order.
func pickContentType(types []string) string {
	for _, t := range types {
		if strings.HasPrefix(strings.ToLower(t), "application/json") {
			return t
		}
	}
	for _, t := range types {
		if strings.Contains(strings.ToLower(t), "+json") {
			return t
		}
	}
	return types[0]
}

func swaggerConsumes(root, op map[string]any) string {
	c := stringList(op["consumes"])
	if len(c) == 0 {
		c = stringList(root["consumes"])
	}
	if len(c) == 0 {
		return "application/json"
	}
	return pickContentType(c)
}

// auth derives the alternatives of an effective security requirement list:
// each requirement object is one alternative, an empty object (or an empty
// list) means no authentication.
func (p *apiParser) auth(security any) [][]AuthScheme {
	reqs := arr(security)
	if len(reqs) == 0 {
		return [][]AuthScheme{{{Type: "none"}}}
	}
	var out [][]AuthScheme
	for _, r := range reqs {
		req := obj(r)
		if len(req) == 0 {
			out = append(out, []AuthScheme{{Type: "none"}})
			continue
		}
		var alt []AuthScheme
		for _, name := range sortedKeys(req) {
			s := p.scheme(name)
			s.Scopes = dedupeStrings(stringList(req[name]))
			alt = append(alt, s)
		}
		out = append(out, alt)
	}
	return out
}

// scheme looks a security scheme up by name.
func (p *apiParser) scheme(name string) AuthScheme {
	var def map[string]any
	if p.swagger {
		def = obj(obj(p.root["securityDefinitions"])[name])
	} else {
		def = deref(p.root, obj(obj(p.root["components"])["securitySchemes"])[name])
	}
	if def == nil {
		p.warn("security requirement names %q, which is not defined", name)
		return AuthScheme{Type: "unknown", SchemeName: name}
	}
	s := AuthScheme{SchemeName: name}
	switch t := str(def, "type"); t {
	case "apiKey":
		s.Type, s.In, s.Name = "apiKey", str(def, "in"), str(def, "name")
	case "http":
		s.Type, s.Scheme, s.BearerFormat = "http", strings.ToLower(str(def, "scheme")), str(def, "bearerFormat")
	case "basic": // Swagger 2.0
		s.Type, s.Scheme = "http", "basic"
	case "oauth2":
		s.Type = "oauth2"
		if p.swagger {
			if f := swaggerFlows[str(def, "flow")]; f != "" {
				s.Flows = []string{f}
			}
		} else {
			s.Flows = sortedKeys(obj(def["flows"]))
		}
	case "openIdConnect":
		s.Type, s.OpenIDConnectURL = "openIdConnect", str(def, "openIdConnectUrl")
	case "mutualTLS":
		s.Type = "mutualTLS"
	default:
		p.warn("security scheme %q has unknown type %q", name, t)
		s.Type = "unknown"
	}
	return s
}

// swaggerFlows maps Swagger 2.0 flow names to OpenAPI 3's, so one filter
// value means one flow whichever version a publisher wrote.
var swaggerFlows = map[string]string{
	"implicit":    "implicit",
	"password":    "password",
	"application": "clientCredentials",
	"accessCode":  "authorizationCode",
}
