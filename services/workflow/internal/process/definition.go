// Package process is the workflow domain: process definitions (data, not
// code), instances and tasks, how a task's outcome advances an instance,
// and the events they emit. It knows nothing of Postgres or RabbitMQ.
package process

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// DefaultDefinitions is the catalogue shipped with the service
// (WORKFLOW_DEFINITIONS replaces it with a file of the same format).
//
//go:embed definitions.json
var DefaultDefinitions []byte

// Step is one stage of a process: a task for a role, due within SLA.
type Step struct {
	Name         string        `json:"name"`
	AssigneeRole string        `json:"assigneeRole"`
	SLA          time.Duration `json:"-"`
	// WaitFor names an event type that, about the process's request,
	// completes the step's task without a person (seed 004 §20: resume),
	// through an active subscription whose reaction is resume-workflow.
	// The task stays open to its role as well, for an event that never
	// comes.
	WaitFor string `json:"waitFor,omitempty"`
}

// Definition is a process for some services.
type Definition struct {
	ID       string   `json:"id"`
	Services []string `json:"services"`
	Steps    []Step   `json:"steps"`
	// SEIUnit is the SEI unit an approved request of this definition is
	// registered under (integration.sei.register.v1's unit); empty lets
	// SEI choose.
	SEIUnit string `json:"seiUnit,omitempty"`
	// StuckAfter is how long an instance may wait on one step before the
	// watchdog reports it stuck (workflow.stuck.v1, once per step); zero:
	// the service's default (WATCHDOG_STUCK_AFTER).
	StuckAfter time.Duration `json:"-"`
}

// Catalog picks a definition by serviceId, falling back to its default.
type Catalog struct {
	byID      map[string]Definition
	byService map[string]string
	def       string
}

// maxSEIUnit bounds a definition's seiUnit (SEI unit codes are short).
const maxSEIUnit = 100

// AssigneeRoles are the roles a step may be assigned to.
var AssigneeRoles = []string{"attendant", "operator"}

// ParseCatalog reads the JSON catalogue format of definitions.json and
// checks it: unique ids, a default that exists, at least one step per
// definition, known roles, positive SLAs, no service in two definitions, a
// trimmed seiUnit.
func ParseCatalog(data []byte) (*Catalog, error) {
	var raw struct {
		Default     string `json:"default"`
		Definitions []struct {
			ID         string   `json:"id"`
			Services   []string `json:"services"`
			SEIUnit    string   `json:"seiUnit"`
			StuckAfter string   `json:"stuckAfter"`
			Steps      []struct {
				Name         string `json:"name"`
				AssigneeRole string `json:"assigneeRole"`
				SLA          string `json:"sla"`
				WaitFor      string `json:"waitFor"`
			} `json:"steps"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("process definitions: %w", err)
	}
	c := &Catalog{byID: map[string]Definition{}, byService: map[string]string{}, def: raw.Default}
	var errs []error
	for _, rd := range raw.Definitions {
		d := Definition{ID: rd.ID, Services: rd.Services, SEIUnit: rd.SEIUnit}
		if d.ID == "" {
			errs = append(errs, errors.New("a definition has no id"))
			continue
		}
		if _, dup := c.byID[d.ID]; dup {
			errs = append(errs, fmt.Errorf("definition %s: duplicate id", d.ID))
		}
		if rd.SEIUnit != strings.TrimSpace(rd.SEIUnit) || len(rd.SEIUnit) > maxSEIUnit {
			errs = append(errs, fmt.Errorf("definition %s: seiUnit %q: want no surrounding blanks and at most %d bytes", d.ID, rd.SEIUnit, maxSEIUnit))
		}
		if len(rd.Steps) == 0 {
			errs = append(errs, fmt.Errorf("definition %s: no steps", d.ID))
		}
		if rd.StuckAfter != "" {
			var err error
			if d.StuckAfter, err = time.ParseDuration(rd.StuckAfter); err != nil || d.StuckAfter <= 0 {
				errs = append(errs, fmt.Errorf("definition %s: stuckAfter %q: want a positive duration like 72h", d.ID, rd.StuckAfter))
			}
		}
		for i, rs := range rd.Steps {
			sla, err := time.ParseDuration(rs.SLA)
			if err != nil || sla <= 0 {
				errs = append(errs, fmt.Errorf("definition %s step %d: sla %q: want a positive duration like 48h", d.ID, i, rs.SLA))
			}
			if rs.Name == "" {
				errs = append(errs, fmt.Errorf("definition %s step %d: no name", d.ID, i))
			}
			if !slices.Contains(AssigneeRoles, rs.AssigneeRole) {
				errs = append(errs, fmt.Errorf("definition %s step %d: assigneeRole %q: want one of %v", d.ID, i, rs.AssigneeRole, AssigneeRoles))
			}
			if rs.WaitFor != strings.TrimSpace(rs.WaitFor) || strings.ContainsAny(rs.WaitFor, " *#") {
				errs = append(errs, fmt.Errorf("definition %s step %d: waitFor %q: want an event type", d.ID, i, rs.WaitFor))
			}
			d.Steps = append(d.Steps, Step{Name: rs.Name, AssigneeRole: rs.AssigneeRole, SLA: sla, WaitFor: rs.WaitFor})
		}
		for _, s := range d.Services {
			if other, dup := c.byService[s]; dup {
				errs = append(errs, fmt.Errorf("service %s is in definitions %s and %s", s, other, d.ID))
			}
			c.byService[s] = d.ID
		}
		c.byID[d.ID] = d
	}
	if _, ok := c.byID[c.def]; !ok {
		errs = append(errs, fmt.Errorf("default definition %q is not defined", c.def))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("process definitions: %w", err)
	}
	return c, nil
}

// For returns the definition for serviceID, or the default one.
func (c *Catalog) For(serviceID string) Definition {
	if id, ok := c.byService[serviceID]; ok {
		return c.byID[id]
	}
	return c.byID[c.def]
}

// ByID returns the definition id.
func (c *Catalog) ByID(id string) (Definition, bool) {
	d, ok := c.byID[id]
	return d, ok
}

// Waiting is a step of a definition that an event type completes
// (Step.WaitFor).
type Waiting struct {
	Definition string   `json:"definition"`
	Services   []string `json:"services"`
	Step       string   `json:"step"`
}

// WaitingFor returns every step, of every definition, that waits for typ,
// by definition id and then in step order.
func (c *Catalog) WaitingFor(typ string) []Waiting {
	out := []Waiting{}
	if c == nil {
		return out // no definitions given (a handler built without them)
	}
	for _, id := range slices.Sorted(maps.Keys(c.byID)) {
		d := c.byID[id]
		for _, s := range d.Steps {
			if s.WaitFor == typ {
				out = append(out, Waiting{Definition: d.ID, Services: d.Services, Step: s.Name})
			}
		}
	}
	return out
}
