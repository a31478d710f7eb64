// Command ardx runs an Agentic Resource Discovery registry and an x402
// payment facilitator from one binary. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT (Ctrl-C) and SIGTERM (systemd, docker stop) both begin a clean
	// shutdown that exits 0. Once one has arrived the handler is removed, so
	// a second Ctrl-C ends a shutdown that hangs.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ardx:", err)
		os.Exit(1)
	}
}

// run builds the command tree and executes it; tests call it with their own
// arguments, environment and output streams.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRootCmd(getenv, stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}
