package facilitator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ardx-dev/ardx/web"
)

// The MCP tools served at POST /mcp.
const (
	ToolFacilitatorStatus  = "facilitator_status"
	ToolSettlementPrice    = "settlement_price"
	ToolFindPaidResource   = "find_paid_resource"
	ToolIntegrationSnippet = "integration_snippet"
)

// MaxFindLimit caps find_paid_resource's limit, as /discovery/resources caps
// its own.
const MaxFindLimit = 100

// StatusInput is the (empty) input of facilitator_status.
type StatusInput struct{}

// PriceInput is the input of settlement_price.
type PriceInput struct {
	Network string `json:"network,omitempty" jsonschema:"a CAIP-2 id (eip155:8453) or v1 name (base); omit for every network"`
}

// PriceOutput is the result of settlement_price.
type PriceOutput struct {
	Currency string         `json:"currency"`
	Unit     string         `json:"unit"`
	Verify   string         `json:"verifyPriceUsd"`
	Networks []NetworkPrice `json:"networks"`
	Notes    []string       `json:"notes"`
}

// FindInput is the input of find_paid_resource.
type FindInput struct {
	Query   string `json:"query" jsonschema:"words to look for in the resource URL, method, description and declared input and output; empty lists the most recently paid"`
	Network string `json:"network,omitempty" jsonschema:"only resources paid on this network (CAIP-2 id or v1 name)"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many results, 1-100; default 10"`
}

// FindOutput is the result of find_paid_resource.
type FindOutput struct {
	Count int             `json:"count"`
	Items []CatalogueItem `json:"items"`
}

// SnippetInput is the input of integration_snippet.
type SnippetInput struct {
	Framework string `json:"framework" jsonschema:"the framework of the paid route"`
	Network   string `json:"network,omitempty" jsonschema:"the network the route is paid on (CAIP-2 id or v1 name); omit for this facilitator's default"`
}

// mcpSchema infers a tool schema from T. Catalogue items carry raw JSON
// (declared shapes, terms); the default inference would describe those as
// byte arrays and then reject the real values, so raw JSON may be anything.
func mcpSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {},
	}})
	if err != nil {
		panic(fmt.Sprintf("mcp schema of %T: %v", *new(T), err))
	}
	return s
}

// newMCPServer builds the MCP server and its four tools. It is stateless:
// every tool answers from the service's live state.
func (s *Service) newMCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "ardx-facilitator", Title: "ardx x402 facilitator", Version: s.binaryVersion()},
		&mcp.ServerOptions{
			Instructions: "Tools of an x402 payment facilitator (USDC over EIP-3009): its status, the price of a settlement, the catalogue of resources paid through it, and code for a paid route.",
			Logger:       s.logger.With("component", "mcp"),
		})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}

	mcp.AddTool(srv, &mcp.Tool{
		Name:         ToolFacilitatorStatus,
		Title:        "Facilitator status",
		Description:  "Networks served, whether each can settle now, observed availability of its RPC and settle path (Wilson lower bound at 95%, withheld under 5 probes), sanctions-screening state and settlement counts.",
		Annotations:  readOnly,
		OutputSchema: mcpSchema[StatusDocument](),
	}, s.toolStatus)

	mcp.AddTool(srv, &mcp.Tool{
		Name:         ToolSettlementPrice,
		Title:        "Settlement price",
		Description:  "The price in USD of one successful settlement on a network (testnets are free; verify is always free).",
		Annotations:  readOnly,
		OutputSchema: mcpSchema[PriceOutput](),
	}, s.toolPrice)

	mcp.AddTool(srv, &mcp.Tool{
		Name:         ToolFindPaidResource,
		Title:        "Find a paid resource",
		Description:  "Search the catalogue of x402 resources paid through this facilitator (the bazaar extension): URL, method, terms and declared input and output shapes.",
		Annotations:  readOnly,
		OutputSchema: mcpSchema[FindOutput](),
	}, s.toolFind)

	in := mcpSchema[SnippetInput]()
	in.Properties["framework"].Enum = make([]any, len(Frameworks))
	for i, f := range Frameworks {
		in.Properties["framework"].Enum[i] = f
	}
	mcp.AddTool(srv, &mcp.Tool{
		Name:         ToolIntegrationSnippet,
		Title:        "Integration snippet",
		Description:  "Code for a paid route that settles through this facilitator: express (@x402/express), hono (@x402/hono), next (@x402/next) or go (net/http).",
		Annotations:  readOnly,
		InputSchema:  in,
		OutputSchema: mcpSchema[Snippet](),
	}, s.toolSnippet)
	return srv
}

func (s *Service) toolStatus(ctx context.Context, _ *mcp.CallToolRequest, _ StatusInput) (*mcp.CallToolResult, StatusDocument, error) {
	return nil, s.status(), nil
}

func (s *Service) toolPrice(ctx context.Context, _ *mcp.CallToolRequest, in PriceInput) (*mcp.CallToolResult, PriceOutput, error) {
	p := s.pricing()
	out := PriceOutput{Currency: p.Currency, Unit: p.Unit, Verify: p.Verify, Networks: p.Networks, Notes: p.Notes}
	if in.Network == "" {
		return nil, out, nil
	}
	for _, n := range p.Networks {
		if n.Network == in.Network || n.V1Network != "" && n.V1Network == in.Network {
			out.Networks = []NetworkPrice{n}
			return nil, out, nil
		}
	}
	return nil, PriceOutput{}, fmt.Errorf("network %q is not served by this facilitator (served: %s)", in.Network, strings.Join(s.networkIDs(), ", "))
}

func (s *Service) toolFind(ctx context.Context, _ *mcp.CallToolRequest, in FindInput) (*mcp.CallToolResult, FindOutput, error) {
	if in.Limit < 0 || in.Limit > MaxFindLimit {
		return nil, FindOutput{}, fmt.Errorf("limit must be between 1 and %d", MaxFindLimit)
	}
	if in.Limit == 0 {
		in.Limit = 10
	}
	out := FindOutput{Items: []CatalogueItem{}}
	if s.cfg.Catalogue != nil {
		out.Items = s.cfg.Catalogue.Search(in.Query, in.Network, in.Limit)
	}
	out.Count = len(out.Items)
	return nil, out, nil
}

func (s *Service) toolSnippet(ctx context.Context, _ *mcp.CallToolRequest, in SnippetInput) (*mcp.CallToolResult, Snippet, error) {
	p, ok := s.snippetParams(in.Network)
	if !ok {
		return nil, Snippet{}, fmt.Errorf("network %q is not served by this facilitator (served: %s)", in.Network, strings.Join(s.networkIDs(), ", "))
	}
	sn, err := IntegrationSnippet(in.Framework, p)
	if err != nil {
		return nil, Snippet{}, err
	}
	// The code goes in the text content as well, readable without parsing
	// the structured result.
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
		Text: fmt.Sprintf("%s\n\n%s:\n\n%s", sn.Install, sn.Filename, sn.Code),
	}}}, sn, nil
}

func (s *Service) networkIDs() []string {
	ids := make([]string, 0, len(s.cfg.Networks))
	for _, n := range s.cfg.Networks {
		ids = append(ids, n.ID())
	}
	return ids
}

// mcpHandler serves POST /mcp: stateless Streamable HTTP with JSON
// responses, so every request stands alone and no session lives in memory.
func (s *Service) mcpHandler() http.Handler {
	srv := s.newMCPServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       s.logger.With("component", "mcp"),
		// The DNS-rebinding guard refuses a loopback listener reached under
		// a public Host, which is exactly how this service runs behind a
		// reverse proxy; the tools are keyless and read public state only.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        MaxBodyBytes,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := web.ReadBody(w, r, MaxBodyBytes)
		if err != nil {
			s.problems.Write(w, r, err)
			return
		}
		head := readRPCHead(body)
		if head.isRequest() && head.JSONRPC != "2.0" {
			writeRPCError(w, head.ID, rpcInvalidRequest, `the "jsonrpc" member must be "2.0"`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		pw := &problemWriter{ResponseWriter: w}
		h.ServeHTTP(pw, r)
		pw.finish(s, r, head)
	})
}

// JSON-RPC 2.0 error codes the wrapper answers with.
const (
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
)

// rpcHead is what the MCP handler reads of a message before the SDK does,
// so that a protocol error about a request with an id can be answered as
// a JSON-RPC error, which is what an MCP client reads.
type rpcHead struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
}

func readRPCHead(body []byte) rpcHead {
	var h rpcHead
	_ = json.Unmarshal(body, &h) // a batch or non-JSON leaves it empty
	return h
}

// isRequest reports whether the message carries an id a client waits on (a
// string or a number; notifications and answers to them have none).
func (h rpcHead) isRequest() bool {
	id := bytes.TrimSpace(h.ID)
	return len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9')
}

// writeRPCError answers a request with a JSON-RPC error object, with status
// 200: the transport worked, and MCP clients read errors from the body of
// a successful POST (a 4xx makes them fail the transport, not the call).
func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	web.WriteJSON(w, http.StatusOK, struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
}

// handleMCPMethodNotAllowed handles "GET /mcp" and "DELETE /mcp": the server
// is stateless, so there is no stream to open and no session to end.
func (s *Service) handleMCPMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST, OPTIONS")
	s.problems.Write(w, r, s.problems.New(web.SlugMethodNotAllowed,
		r.Method+" /mcp is not served: this MCP server is stateless (Streamable HTTP without sessions); send JSON-RPC requests with POST"))
}

// problemWriter turns the SDK's plain-text error answers into JSON-RPC
// errors when they concern a request with an id (unknown method, invalid
// request), else into problem documents, as every non-payment path of the
// facilitator answers (not JSON, a batch, body too large); JSON-RPC answers
// pass through.
type problemWriter struct {
	http.ResponseWriter
	status  int
	capture bool
	body    bytes.Buffer
}

func (pw *problemWriter) WriteHeader(status int) {
	if pw.status != 0 {
		return
	}
	pw.status = status
	ct := pw.Header().Get("Content-Type")
	if status >= 400 && (ct == "" || strings.HasPrefix(ct, "text/plain")) {
		pw.capture = true
		return
	}
	pw.ResponseWriter.WriteHeader(status)
}

func (pw *problemWriter) Write(b []byte) (int, error) {
	if pw.status == 0 {
		pw.WriteHeader(http.StatusOK)
	}
	if pw.capture {
		if pw.body.Len() < 4096 {
			pw.body.Write(b[:min(len(b), 4096-pw.body.Len())])
		}
		return len(b), nil
	}
	return pw.ResponseWriter.Write(b)
}

// Flush keeps streaming answers streaming.
func (pw *problemWriter) Flush() {
	if f, ok := pw.ResponseWriter.(http.Flusher); ok && !pw.capture {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (pw *problemWriter) Unwrap() http.ResponseWriter { return pw.ResponseWriter }

// slugOfStatus names the problem of a status the SDK answers with.
var slugOfStatus = map[int]string{
	http.StatusBadRequest:            web.SlugBadRequest,
	http.StatusForbidden:             web.SlugForbidden,
	http.StatusNotFound:              web.SlugNotFound,
	http.StatusMethodNotAllowed:      web.SlugMethodNotAllowed,
	http.StatusNotAcceptable:         web.SlugNotAcceptable,
	http.StatusRequestEntityTooLarge: web.SlugPayloadTooLarge,
	http.StatusUnsupportedMediaType:  web.SlugUnsupportedMedia,
}

func (pw *problemWriter) finish(s *Service, r *http.Request, head rpcHead) {
	if !pw.capture {
		return
	}
	detail := strings.TrimSpace(pw.body.String())
	pw.Header().Del("Content-Length")
	pw.Header().Del("X-Content-Type-Options")
	if pw.status == http.StatusBadRequest && head.isRequest() {
		// The SDK refused a request a client waits on: unknown methods
		// (its words: "not handled ... unsupported") and other invalid
		// requests become JSON-RPC errors for that id.
		code := rpcInvalidRequest
		if strings.Contains(detail, "unsupported") {
			code, detail = rpcMethodNotFound, fmt.Sprintf("method %q is not served by this MCP server", head.Method)
		}
		writeRPCError(pw.ResponseWriter, head.ID, code, detail)
		return
	}
	slug, ok := slugOfStatus[pw.status]
	if !ok {
		slug = web.SlugInternal
	}
	if slug == web.SlugInternal {
		s.logger.Error("mcp handler failed", "status", pw.status, "detail", detail, "request_id", web.RequestID(r.Context()))
		detail = "the server failed to handle the request; retry with backoff"
	}
	s.problems.Write(pw.ResponseWriter, r, s.problems.New(slug, detail))
}
