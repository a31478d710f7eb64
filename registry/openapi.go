package registry

import (
	_ "embed"
	"fmt"

	"github.com/ardx-dev/ardx/web"
)

// openapiTemplate is the registry's interface description (OpenAPI 3.1.0,
// interface version 1.0.0). Its servers list is filled in from PublicURL.
//
//go:embed openapi.json
var openapiTemplate []byte

// buildOpenAPI returns the description served at GET /openapi.json.
func buildOpenAPI(publicURL string) ([]byte, error) {
	doc, err := web.OpenAPIWithServer(openapiTemplate, publicURL)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	return doc, nil
}
