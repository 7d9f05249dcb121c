// Command rules checks that the rule names doc comments cite resolve: every
// name such as S3 or H1 cited in parentheses, and every section such as §15,
// in a comment of a non-test Go file must be a rule or section of
// docs/design.md, and every package whose comments cite one must say, in
// one of its files, that the names refer to docs/design.md (so that a
// reader of go doc knows where to look).
//
// Usage, from the repository's root:
//
//	go run ./scripts/rules [root]
//
// It prints one line per problem, file:line: message, and exits 1 when
// there is one, 2 when the design document cannot be read. make lint runs
// it.
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// designDoc is the document the rule names refer to, from the root.
const designDoc = "docs/design.md"

var (
	// ruleHeading and sectionHeading are how design.md declares a rule
	// ("### S1") and a numbered section ("## 15. Groups").
	ruleHeading    = regexp.MustCompile(`^###\s+([A-Z][0-9]+)\b`)
	sectionHeading = regexp.MustCompile(`^##\s+([0-9]+)\.`)

	// citation is a parenthesized list that holds rule names, such as
	// "(S4, H1)" or "(rule T2)"; ruleName and sectionName pick the names
	// out of a comment.
	citation    = regexp.MustCompile(`\(([^()]*\b[A-Z][0-9]+\b[^()]*)\)`)
	ruleName    = regexp.MustCompile(`\b([SDTCAFEHLBG][0-9]+)\b`)
	sectionName = regexp.MustCompile(`§\s?([0-9]+)`)
)

// problem is one finding, printed as file:line: message.
type problem struct {
	file string
	line int
	msg  string
}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	rules, sections, err := declared(filepath.Join(root, designDoc))
	if err != nil {
		fmt.Fprintf(os.Stderr, "rules: %v\n", err)
		os.Exit(2)
	}
	problems, err := check(root, rules, sections)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rules: %v\n", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Printf("%s:%d: %s\n", p.file, p.line, p.msg)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// declared reads the rule names and section numbers the design document
// declares.
func declared(path string) (rules, sections map[string]bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	rules, sections = map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := ruleHeading.FindStringSubmatch(sc.Text()); m != nil {
			rules[m[1]] = true
		}
		if m := sectionHeading.FindStringSubmatch(sc.Text()); m != nil {
			sections[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if len(rules) == 0 {
		return nil, nil, fmt.Errorf("%s declares no rule (want headings such as \"### S1\")", path)
	}
	return rules, sections, nil
}

// check walks the Go files under root, skipping tests, testdata and
// hidden directories, and returns the problems sorted by file and line.
func check(root string, rules, sections map[string]bool) ([]problem, error) {
	var problems []problem
	cites := map[string]problem{} // package dir → its first citation
	points := map[string]bool{}   // package dir → a file names the design doc
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		found, pointer, err := scan(path, rel, rules, sections)
		if err != nil {
			return err
		}
		dir := filepath.Dir(rel)
		problems = append(problems, found.unknown...)
		if found.first != nil {
			if _, ok := cites[dir]; !ok {
				cites[dir] = *found.first
			}
		}
		points[dir] = points[dir] || pointer
		return nil
	})
	if err != nil {
		return nil, err
	}
	for dir, first := range cites {
		if !points[dir] {
			problems = append(problems, problem{first.file, first.line,
				fmt.Sprintf("package %s cites rule names but none of its files says they refer to %s", dir, designDoc)})
		}
	}
	sort.Slice(problems, func(i, j int) bool {
		if problems[i].file != problems[j].file {
			return problems[i].file < problems[j].file
		}
		return problems[i].line < problems[j].line
	})
	return problems, nil
}

// scanned is what one file's comments cite.
type scanned struct {
	first   *problem  // the first citation, to point at
	unknown []problem // citations design.md does not declare
}

// scan reads one file's line comments. pointer reports whether a comment
// names the design document.
func scan(path, rel string, rules, sections map[string]bool) (s scanned, pointer bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return s, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		i := strings.Index(line, "//")
		if i < 0 {
			continue
		}
		comment := line[i:]
		if strings.Contains(comment, designDoc) {
			pointer = true
		}
		for _, c := range citation.FindAllStringSubmatch(comment, -1) {
			for _, r := range ruleName.FindAllString(c[1], -1) {
				if s.first == nil {
					s.first = &problem{file: rel, line: n}
				}
				if !rules[r] {
					s.unknown = append(s.unknown, problem{rel, n, fmt.Sprintf("rule %s is not declared in %s", r, designDoc)})
				}
			}
		}
		for _, m := range sectionName.FindAllStringSubmatch(comment, -1) {
			if s.first == nil {
				s.first = &problem{file: rel, line: n}
			}
			if !sections[m[1]] {
				s.unknown = append(s.unknown, problem{rel, n, fmt.Sprintf("section §%s is not a numbered section of %s", m[1], designDoc)})
			}
		}
	}
	return s, pointer, sc.Err()
}
