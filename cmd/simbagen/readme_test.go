package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeMarker precedes, in README.md, the block of commands that a user
// runs to set up simbagen in a module; TestREADMECommands runs that block.
const readmeMarker = "<!-- cmd/simbagen's TestREADMECommands runs this block"

// readmeCommands returns the commands of the shell block after readmeMarker
// in the README, one per line, without their comments, and the
// //go:generate line of the README's first Go example.
func readmeCommands(t *testing.T, readme []byte) (commands [][]string, generate string) {
	t.Helper()
	_, block, ok := bytes.Cut(readme, []byte(readmeMarker))
	if !ok {
		t.Fatalf("README.md lacks the marker %q before the set-up commands", readmeMarker)
	}
	_, block, ok = bytes.Cut(block, []byte("\n```sh\n"))
	if !ok {
		t.Fatal("README.md: no ```sh block after the marker")
	}
	block, _, ok = bytes.Cut(block, []byte("\n```"))
	if !ok {
		t.Fatal("README.md: the ```sh block after the marker is not closed")
	}
	sc := bufio.NewScanner(bytes.NewReader(block))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if f := strings.Fields(line); len(f) > 0 {
			if f[0] != "go" {
				t.Fatalf("README.md: set-up command %q is not a go command; this test runs only those", line)
			}
			commands = append(commands, f)
		}
	}
	if len(commands) == 0 {
		t.Fatal("README.md: the set-up block has no command")
	}
	for line := range strings.Lines(string(readme)) {
		if strings.HasPrefix(line, "//go:generate ") {
			return commands, strings.TrimSpace(line)
		}
	}
	t.Fatal("README.md: no //go:generate line in its examples")
	return nil, ""
}

// hello is the small annotated program the test builds; GENERATE is the
// README's //go:generate line.
const hello = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

GENERATE

var ran = make(chan runtime.Token, 1)

// Hello runs on the leader, once an hour.
//
//simba:scheduled lease=hello rate=1h
func Hello(ctx context.Context, t *runtime.Term) error {
	select {
	case ran <- t.Token():
	default:
	}
	return nil
}

func main() {
	ctx := context.Background()
	c, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	regs, err := RegisterAll(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	select {
	case tok := <-ran:
		fmt.Println("Hello ran, with a token:", tok > 0)
	case <-time.After(20 * time.Second):
		fmt.Fprintln(os.Stderr, "Hello did not run in 20s")
		os.Exit(1)
	}
	for _, r := range regs {
		r.Stop(ctx)
	}
	c.Close(ctx)
}
`

// TestREADMECommands follows the README as a new user would: in a fresh
// module (go mod init; a replace directive points this module at the
// checkout), it runs the README's set-up commands, exactly as written and
// in order, around a small annotated program that uses the README's
// //go:generate line, then vets, builds and runs the program. The README
// block and this test change together: the test reads the commands from
// the README, and fails if they are missing or are not go commands.
func TestREADMECommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go get -tool, go generate and go build in a fresh module (30–60 s)")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands, generate := readmeCommands(t, readme)
	if generate != "//go:generate go tool simbagen" {
		t.Errorf("README's go:generate line is %q; want //go:generate go tool simbagen", generate)
	}

	dir := t.TempDir()
	// The module is not published: this module's path is private, so the go
	// command asks no proxy for it and, with version control off for it,
	// takes the replacement; every other module comes from GOPROXY as
	// usual.
	env := append(os.Environ(),
		"GOPRIVATE=github.com/simba-go/simba",
		"GOVCS=private:off",
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
	run := func(args ...string) string {
		t.Helper()
		start := time.Now()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		t.Logf("%s (%.1fs)", strings.Join(args, " "), time.Since(start).Seconds())
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("go", "mod", "init", "example.test/hello")
	run("go", "mod", "edit", "-replace", "github.com/simba-go/simba="+repo)
	if err := os.WriteFile(filepath.Join(dir, "hello.go"), []byte(strings.Replace(hello, "GENERATE", generate, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		run(c...)
	}

	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(gomod, []byte("\ntool github.com/simba-go/simba/cmd/simbagen\n")) {
		t.Errorf("go.mod after the README's commands has no tool line for simbagen:\n%s", gomod)
	}
	gen, err := os.ReadFile(filepath.Join(dir, "simba_gen.go"))
	if err != nil {
		t.Fatalf("the README's commands wrote no simba_gen.go: %v", err)
	}
	if !bytes.Contains(gen, []byte("func RegisterHello(")) {
		t.Errorf("simba_gen.go declares no RegisterHello:\n%s", gen)
	}
	run("go", "vet", "./...")
	run("go", "build", "-o", "hello", ".")
	if out := run(filepath.Join(dir, "hello")); out != "Hello ran, with a token: true\n" {
		t.Errorf("the program printed %q; want Hello to have run with a token", out)
	}
}
