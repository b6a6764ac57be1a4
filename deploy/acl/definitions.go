package acl

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Definitions is a RabbitMQ definitions document (the format of
// `rabbitmqctl export_definitions`, the management API's /api/definitions and
// the `load_definitions` setting). Fields RabbitMQ does not know are ignored
// on import, which is how Comment reaches the committed file.
type Definitions struct {
	Comment          string               `json:"_comment,omitempty"`
	Users            []DefUser            `json:"users"`
	Vhosts           []DefVhost           `json:"vhosts"`
	Permissions      []DefPermission      `json:"permissions"`
	TopicPermissions []DefTopicPermission `json:"topic_permissions"`
	Exchanges        []DefExchange        `json:"exchanges"`
	Queues           []DefQueue           `json:"queues"`
	Bindings         []DefBinding         `json:"bindings"`
	Policies         []map[string]any     `json:"policies"`
	Parameters       []map[string]any     `json:"parameters"`
	GlobalParameters []map[string]any     `json:"global_parameters"`
}

// DefUser is a broker user. Password is a clear-text password, which RabbitMQ
// hashes on import.
type DefUser struct {
	Name     string   `json:"name"`
	Password string   `json:"password"`
	Tags     []string `json:"tags"`
}

// DefVhost is a virtual host.
type DefVhost struct {
	Name string `json:"name"`
}

// DefPermission is a user's permissions in a vhost.
type DefPermission struct {
	User      string `json:"user"`
	Vhost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// DefTopicPermission is a user's routing-key permissions on a topic exchange.
type DefTopicPermission struct {
	User     string `json:"user"`
	Vhost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

// DefExchange is a durable exchange.
type DefExchange struct {
	Name       string         `json:"name"`
	Vhost      string         `json:"vhost"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// DefQueue is a durable queue with its exact arguments.
type DefQueue struct {
	Name       string         `json:"name"`
	Vhost      string         `json:"vhost"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

// DefBinding binds a queue to an exchange.
type DefBinding struct {
	Source          string         `json:"source"`
	Vhost           string         `json:"vhost"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

// DevPassword is the LOCAL-DEVELOPMENT-ONLY password of a service's broker
// user (and database role). It says so in its value, so it is recognisable
// wherever it leaks to.
func DevPassword(user string) string { return "local-dev-only-" + user }

// AdminUser is the operator user of the definitions file (management UI,
// DLQ replay with fabricctl). It is not a service identity.
const AdminUser = "agora-admin"

// Options shape a definitions document.
type Options struct {
	// Vhost defaults to Vhost ("agora").
	Vhost string
	// UserSuffix is appended to every user name; tests use it to keep
	// concurrent runs apart (users are global to the broker).
	UserSuffix string
	// Password returns the password of a user (after the suffix); it
	// defaults to DevPassword.
	Password func(user string) string
	// Admin adds AdminUser with full permissions in the vhost.
	Admin bool
	// Topology adds the exchanges, queues and bindings, so the broker has
	// them before any service starts.
	Topology bool
	// Comment is written as "_comment".
	Comment string
}

// User returns the broker user name of service under opts.
func (o Options) User(service string) string { return service + o.UserSuffix }

// Definitions renders p as a definitions document.
func (p Policy) Definitions(opts Options) Definitions {
	if opts.Vhost == "" {
		opts.Vhost = Vhost
	}
	if opts.Password == nil {
		opts.Password = DevPassword
	}
	d := Definitions{
		Comment:          opts.Comment,
		Vhosts:           []DefVhost{{Name: opts.Vhost}},
		Users:            []DefUser{},
		Permissions:      []DefPermission{},
		TopicPermissions: []DefTopicPermission{},
		Exchanges:        []DefExchange{},
		Queues:           []DefQueue{},
		Bindings:         []DefBinding{},
		Policies:         []map[string]any{},
		Parameters:       []map[string]any{},
		GlobalParameters: []map[string]any{},
	}
	if opts.Admin {
		name := AdminUser + opts.UserSuffix
		d.Users = append(d.Users, DefUser{Name: name, Password: opts.Password(name), Tags: []string{"administrator"}})
		d.Permissions = append(d.Permissions, DefPermission{User: name, Vhost: opts.Vhost, Configure: ".*", Write: ".*", Read: ".*"})
	}
	for _, g := range p.Grants {
		name := opts.User(g.Service)
		// No tags: services need no management UI or HTTP API access.
		d.Users = append(d.Users, DefUser{Name: name, Password: opts.Password(name), Tags: []string{}})
		perm := g.Permissions()
		d.Permissions = append(d.Permissions, DefPermission{User: name, Vhost: opts.Vhost,
			Configure: perm.Configure, Write: perm.Write, Read: perm.Read})
		for _, tp := range g.TopicPermissions() {
			d.TopicPermissions = append(d.TopicPermissions, DefTopicPermission{User: name, Vhost: opts.Vhost,
				Exchange: tp.Exchange, Write: tp.Write, Read: tp.Read})
		}
	}
	if opts.Topology {
		d.Exchanges, d.Queues, d.Bindings, d.Policies = topologyDefs(p.Topology, opts.Vhost)
	}
	return d
}

// topologyDefs renders the topology's exchanges, queues, bindings and the
// queues' policies (a retry tier's delay, topology.Consumer.Queues): the
// policies are in the definitions so that a broker provisioned from them
// has each tier's policy before any service declares the tier; `fabricctl
// topology apply` sets the same ones on a broker provisioned otherwise.
func topologyDefs(topo topology.Description, vhost string) ([]DefExchange, []DefQueue, []DefBinding, []map[string]any) {
	var exs []DefExchange
	for _, e := range topo.Exchanges {
		exs = append(exs, DefExchange{Name: e.Name, Vhost: vhost, Type: e.Type, Durable: true, Arguments: map[string]any{}})
	}
	var qs []DefQueue
	var bs []DefBinding
	ps := []map[string]any{}
	for _, c := range topo.Consumers {
		for _, q := range c.Queues() {
			args := map[string]any{}
			for k, v := range q.Args {
				args[k] = v
			}
			qs = append(qs, DefQueue{Name: q.Name, Vhost: vhost, Durable: true, Arguments: args})
			if p := q.Policy; p != nil {
				ps = append(ps, map[string]any{"vhost": vhost, "name": p.Name, "pattern": p.Pattern,
					"apply-to": p.ApplyTo, "priority": p.Priority, "definition": p.Definition})
			}
		}
		// Q.dlq to platform.dead-letter, Q and Q.retry.<n> to platform.retry.
		for _, b := range c.FabricBindings() {
			bs = append(bs, DefBinding{Source: b.Exchange, Vhost: vhost, Destination: b.Queue,
				DestinationType: "queue", RoutingKey: b.Key, Arguments: map[string]any{}})
		}
		for _, b := range c.Bindings {
			bs = append(bs, DefBinding{Source: b.Exchange, Vhost: vhost, Destination: c.Queue,
				DestinationType: "queue", RoutingKey: b.Key, Arguments: map[string]any{}})
		}
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	sort.Slice(ps, func(i, j int) bool { return ps[i]["name"].(string) < ps[j]["name"].(string) })
	return exs, qs, bs, ps
}

// JSON renders d as indented JSON with a trailing newline, stable across runs
// (encoding/json sorts map keys).
func (d Definitions) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("acl: encode definitions: %w", err)
	}
	return append(b, '\n'), nil
}

// DefinitionsComment heads the committed definitions file.
const DefinitionsComment = "GENERATED by `go run ./deploy/cmd/gendeploy` from deploy/acl; do not edit. " +
	"Passwords are LOCAL-DEVELOPMENT-ONLY (local-dev-only-<user>): never use this file on a reachable broker; " +
	"the Helm chart renders the same permissions with your passwords."

// PlatformDefinitions renders the committed deploy/rabbitmq/definitions.json:
// vhost agora, the admin user and one user per service with local-development
// passwords, their permissions, and the platform topology.
func PlatformDefinitions() ([]byte, error) {
	p, err := Platform()
	if err != nil {
		return nil, err
	}
	return p.Definitions(Options{Admin: true, Topology: true, Comment: DefinitionsComment}).JSON()
}

// ChartACL renders the Helm chart's copy of the policy (files/acl.json): the
// same users, permissions and topology with empty passwords, which the chart
// fills from its values.
func ChartACL() ([]byte, error) {
	p, err := Platform()
	if err != nil {
		return nil, err
	}
	d := p.Definitions(Options{Admin: true, Topology: true, Password: func(string) string { return "" },
		Comment: "GENERATED by `go run ./deploy/cmd/gendeploy` from deploy/acl; do not edit. Passwords come from the chart's values."})
	return d.JSON()
}
