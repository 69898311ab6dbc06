module github.com/placement/placement/clients/go

go 1.19

// Versions match the Debian 12 packages the stubs are generated and tested with
// (golang-google-grpc-dev 1.33.3, golang-google-protobuf-dev 1.28.1). Offline builds use
// GOPATH mode against /usr/share/gocode instead of this file: see README "## Clients".
require (
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
