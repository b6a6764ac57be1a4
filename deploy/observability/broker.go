package observability

// BrokerMetrics are series names RabbitMQ's rabbitmq_prometheus plugin serves on
// /metrics with prometheus.return_per_object_metrics = true (compose's agora.conf,
// the chart's RabbitmqCluster), in RabbitMQ 3.10 (Debian bookworm, the local
// stand-in image) and 3.13 (the public image and the chart's default) alike. Read
// from the plugin's collectors (prometheus_rabbitmq_core_metrics_collector.erl:
// queue_coarse_metrics, queue_metrics, channel_*_metrics and the totals;
// rabbit_global_counters.erl for rabbitmq_global_*, labelled protocol and
// queue_type) at tags v3.10.8 and v3.13.7. Per-queue series carry vhost and
// queue, per-channel ones channel as well. Only names both versions serve are here;
// add one only after reading it in both.
var BrokerMetrics = map[string]bool{
	// Per queue (vhost, queue).
	"rabbitmq_queue_messages":                 true,
	"rabbitmq_queue_messages_ready":           true,
	"rabbitmq_queue_messages_unacked":         true,
	"rabbitmq_queue_consumers":                true,
	"rabbitmq_queue_messages_published_total": true,
	// Per channel and queue (channel, vhost, queue) or per channel (channel).
	"rabbitmq_channel_messages_delivered_ack_total":       true,
	"rabbitmq_channel_messages_redelivered_total":         true,
	"rabbitmq_channel_messages_acked_total":               true,
	"rabbitmq_channel_messages_published_total":           true,
	"rabbitmq_channel_messages_confirmed_total":           true,
	"rabbitmq_channel_messages_unroutable_returned_total": true,
	"rabbitmq_channel_messages_unroutable_dropped_total":  true,
	"rabbitmq_channel_messages_unacked":                   true,
	"rabbitmq_channel_consumers":                          true,
	// Node totals.
	"rabbitmq_connections": true,
	"rabbitmq_channels":    true,
	"rabbitmq_consumers":   true,
	"rabbitmq_queues":      true,
	// Global counters, present from boot (protocol; queue_type for deliveries).
	"rabbitmq_global_messages_received_total":            true,
	"rabbitmq_global_messages_received_confirm_total":    true,
	"rabbitmq_global_messages_routed_total":              true,
	"rabbitmq_global_messages_unroutable_returned_total": true,
	"rabbitmq_global_messages_unroutable_dropped_total":  true,
	"rabbitmq_global_messages_confirmed_total":           true,
	"rabbitmq_global_messages_delivered_total":           true,
	"rabbitmq_global_messages_redelivered_total":         true,
	"rabbitmq_global_messages_acknowledged_total":        true,
	"rabbitmq_global_publishers":                         true,
	"rabbitmq_global_consumers":                          true,
}

// PrometheusMetrics are the series Prometheus adds for every scrape target.
var PrometheusMetrics = map[string]bool{
	"up":                                    true,
	"scrape_duration_seconds":               true,
	"scrape_samples_scraped":                true,
	"scrape_samples_post_metric_relabeling": true,
	"scrape_series_added":                   true,
}
