package sources

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// maxServerCapabilities bounds the tool names listed on a server entry.
const maxServerCapabilities = 100

// MCPServer is what was read about one MCP server: its card, its live tool
// list, or both.
type MCPServer struct {
	Card     *CardFetch // nil when no card was found
	Live     *ToolList  // nil when the endpoint was not listed
	Warnings []string   // why a half is missing
}

// ObservedServer is what ardx saw of a live server, kept in the server
// entry's card under _meta["dev.ardx/observed"].
type ObservedServer struct {
	Endpoint        string   `json:"endpoint"`
	Transport       string   `json:"transport"`
	Handshake       string   `json:"handshake,omitempty"`
	ProtocolVersion string   `json:"protocolVersion,omitempty"`
	ServerName      string   `json:"serverName,omitempty"`
	ServerVersion   string   `json:"serverVersion,omitempty"`
	Instructions    string   `json:"instructions,omitempty"`
	AuthRequired    bool     `json:"authRequired,omitempty"`
	WWWAuthenticate string   `json:"wwwAuthenticate,omitempty"`
	Tools           []string `json:"tools,omitempty"`
}

// observedKey is the _meta key of ObservedServer: reverse-DNS, as MCP asks
// of _meta keys, so it never collides with the publisher's.
const observedKey = "dev.ardx/observed"

// ToolData is the inline data of a tool entry (TypeMCPTool): the tool as
// listed and the server that serves it.
type ToolData struct {
	Tool
	Server ToolServer `json:"server"`
}

// ToolServer links a tool to its server.
type ToolServer struct {
	Identifier string `json:"identifier"` // the server entry
	Endpoint   string `json:"endpoint,omitempty"`
	Transport  string `json:"transport"`
	Tool       string `json:"tool"` // the name to call
}

// MCPEntries turns what was read about a server into entries: the server
// (TypeMCPServer, data = the card, published or built from serverInfo, with
// what ardx observed under _meta) first, then one TypeMCPTool entry per
// tool. Tools come from the live list; a legacy card's static list is used
// only when there is no live one. domain anchors the identifiers; empty
// means the host of the card or endpoint.
func MCPEntries(srv *MCPServer, domain string) (*Result, error) {
	if srv == nil || srv.Card == nil && srv.Live == nil {
		return nil, fmt.Errorf("sources: nothing read about the MCP server")
	}
	var card *ServerCard
	var live *ToolList
	if srv.Card != nil {
		card = srv.Card.Card
	}
	live = srv.Live
	endpoint := ""
	if live != nil {
		endpoint = live.Endpoint
	} else if card != nil {
		endpoint = card.StreamableHTTPEndpoint()
	}
	if domain == "" {
		if srv.Card != nil {
			domain = domainOf(srv.Card.Source.URL)
		} else {
			domain = domainOf(endpoint)
		}
	}
	d, ok := normalizeDomain(domain)
	if !ok {
		return nil, fmt.Errorf("sources: %q cannot anchor an identifier (a fully qualified domain name is needed)", domain)
	}
	res := &Result{Warnings: append([]string(nil), srv.Warnings...)}
	if live != nil {
		res.Warnings = append(res.Warnings, live.Warnings...)
	}

	var name, title, version, description string
	if card != nil {
		name, title, version, description = card.Name, card.Title, card.Version, card.Description
	}
	if live != nil {
		name = firstNonEmpty(name, live.ServerName)
		title = firstNonEmpty(title, live.ServerTitle)
		version = firstNonEmpty(version, live.ServerVersion)
	}
	serverSlug := firstNonEmpty(slug(name), "mcp")
	ids := idSet{}
	server := Entry{
		Identifier:  ids.unique("urn:air:"+d+":mcp:", serverSlug),
		DisplayName: firstNonEmpty(title, name, d+" MCP server"),
		Type:        TypeMCPServer,
		Description: clip(description, maxDescriptionLen),
		Version:     version,
	}
	var tools []ListedTool
	toolSource := "tools/list"
	switch {
	case live != nil && !live.AuthRequired:
		tools = live.Tools
	case card != nil && len(card.Tools) > 0:
		toolSource = "card"
		for _, t := range card.Tools {
			tools = append(tools, ListedTool{Tool: t, Source: srv.Card.Source})
		}
	}

	if srv.Card != nil {
		server.Metadata = srv.Card.Source.metadata("mcp-card")
		server.Metadata["mcp.cardUrl"] = srv.Card.Source.URL
	} else {
		server.Metadata = live.HandshakeSource.metadata("mcp-tools")
	}
	if endpoint != "" {
		server.Metadata["mcp.endpoint"] = endpoint
		server.Metadata["mcp.transport"] = "streamable-http"
	}
	if live != nil {
		server.Metadata["mcp.handshake"] = live.Handshake
		if live.ProtocolVersion != "" {
			server.Metadata["mcp.protocolVersion"] = live.ProtocolVersion
		}
		if live.AuthRequired {
			server.Metadata["mcp.authRequired"] = true
		} else {
			server.Metadata["mcp.toolCount"] = len(live.Tools)
		}
		if srv.Card != nil && !live.HandshakeSource.FetchedAt.IsZero() {
			// The card is the entry's source; the live exchange is cited too.
			server.Metadata["mcp.live.url"] = live.HandshakeSource.URL
			server.Metadata["mcp.live.request"] = live.HandshakeSource.Method
			server.Metadata["mcp.live.fetchedAt"] = live.HandshakeSource.FetchedAt.UTC().Format(time.RFC3339)
			server.Metadata["mcp.live.httpStatus"] = live.HandshakeSource.HTTPStatus
			server.Metadata["mcp.live.sha256"] = live.HandshakeSource.SHA256
		}
	}
	for _, t := range tools {
		if len(server.Capabilities) == maxServerCapabilities {
			break
		}
		server.Capabilities = append(server.Capabilities, t.Name)
	}
	server.Capabilities = dedupeStrings(server.Capabilities)
	data, err := serverData(card, name, title, version, endpoint, live, server.Capabilities)
	if err != nil {
		return nil, err
	}
	server.Data = data
	qs := []string{title, firstSentence(description)}
	if live != nil {
		qs = append(qs, live.ServerTitle)
	}
	server.RepresentativeQueries = queries(qs...)
	res.Entries = append(res.Entries, server)
	warnQueries(res, server)

	for _, t := range tools {
		e := Entry{
			Identifier:   ids.unique(server.Identifier+":", firstNonEmpty(slug(t.Name), "tool")),
			DisplayName:  firstNonEmpty(collapseSpace(t.Title), annotationTitle(t.Annotations), t.Name),
			Type:         TypeMCPTool,
			Description:  clip(t.Description, maxDescriptionLen),
			Version:      version,
			Capabilities: []string{t.Name},
			Metadata:     t.Source.metadata(map[bool]string{true: "mcp-tools", false: "mcp-card"}[toolSource == "tools/list"]),
			Data: &ToolData{
				Tool:   t.Tool,
				Server: ToolServer{Identifier: server.Identifier, Endpoint: endpoint, Transport: "streamable-http", Tool: t.Name},
			},
		}
		e.Metadata["mcp.server"] = server.Identifier
		e.Metadata["mcp.tool"] = t.Name
		if endpoint != "" {
			e.Metadata["mcp.endpoint"] = endpoint
		}
		if a := t.Annotations; a != nil {
			for k, v := range map[string]*bool{"mcp.readOnlyHint": a.ReadOnlyHint, "mcp.destructiveHint": a.DestructiveHint, "mcp.idempotentHint": a.IdempotentHint, "mcp.openWorldHint": a.OpenWorldHint} {
				if v != nil {
					e.Metadata[k] = *v
				}
			}
		}
		e.RepresentativeQueries = queries(collapseSpace(t.Title), firstSentence(t.Description), annotationTitle(t.Annotations))
		res.Entries = append(res.Entries, e)
		warnQueries(res, e)
	}
	return res, nil
}

func annotationTitle(a *ToolAnnotations) string {
	if a == nil {
		return ""
	}
	return collapseSpace(a.Title)
}

// serverData is the server entry's data: the published card with ardx's
// observations added under _meta, or, without a card, a minimal SEP-2127
// card built from serverInfo.
func serverData(card *ServerCard, name, title, version, endpoint string, live *ToolList, tools []string) (json.RawMessage, error) {
	m := map[string]any{}
	if card != nil && len(card.Raw) > 0 {
		if err := json.Unmarshal(card.Raw, &m); err != nil || m == nil {
			return nil, fmt.Errorf("sources: re-reading server card: %v", err)
		}
	} else {
		m["name"] = name
		if title != "" {
			m["title"] = title
		}
		if version != "" {
			m["version"] = version
		}
		if endpoint != "" {
			m["remotes"] = []any{map[string]any{"type": "streamable-http", "url": endpoint}}
		}
	}
	if live != nil || endpoint != "" {
		obs := ObservedServer{Endpoint: endpoint, Transport: "streamable-http", Tools: tools}
		if card != nil {
			obs.Instructions = card.Instructions
		}
		if live != nil {
			obs.Handshake, obs.ProtocolVersion = live.Handshake, live.ProtocolVersion
			obs.ServerName, obs.ServerVersion = live.ServerName, live.ServerVersion
			obs.Instructions = firstNonEmpty(live.Instructions, obs.Instructions)
			obs.AuthRequired, obs.WWWAuthenticate = live.AuthRequired, live.WWWAuthenticate
		}
		meta, _ := m["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[observedKey] = obs
		m["_meta"] = meta
	}
	return marshalNoEscape(m)
}

// marshalNoEscape encodes without HTML escaping, so "<tool>" in a
// description is stored as the publisher wrote it.
func marshalNoEscape(v any) (json.RawMessage, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return json.RawMessage(strings.TrimRight(b.String(), "\n")), nil
}
