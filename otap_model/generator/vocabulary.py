"""Fixed vocabulary of the simulated system: services, languages and their instrumentation
libraries, routes, database statements, log templates and value pools.

Everything real systems repeat (service names, routes, statements, templates, keys) comes from
these tables; only what real systems make unique (ids, durations, request ids) is drawn at random.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_URLS = (
    "https://opentelemetry.io/schemas/1.24.0",
    "https://opentelemetry.io/schemas/1.26.0",
    "https://opentelemetry.io/schemas/1.27.0",
)


@dataclass(frozen=True)
class Language:
    """An SDK language with the instrumentation scopes its services use."""

    name: str
    sdk_version: str
    server_scope: tuple[str, str]  # (name, version) of the inbound HTTP/gRPC instrumentation
    http_client_scope: tuple[str, str]
    rpc_scope: tuple[str, str]
    db_scope: tuple[str, str]
    messaging_scope: tuple[str, str]
    log_scopes: tuple[str, ...]  # logger names / categories (the SDK uses them as scope names)
    runtime_meter: tuple[str, str]
    severity_text: dict[int, str]  # severity number -> the text this language's loggers write
    thread_names: tuple[str, ...]


_JAVA_SEV = {5: "DEBUG", 9: "INFO", 13: "WARN", 17: "ERROR", 21: "FATAL"}
_LOWER_SEV = {5: "debug", 9: "info", 13: "warn", 17: "error", 21: "fatal"}

LANGUAGES: dict[str, Language] = {
    "java": Language(
        "java",
        "1.44.1",
        ("io.opentelemetry.tomcat-10.0", "2.10.0-alpha"),
        ("io.opentelemetry.java-http-client", "2.10.0-alpha"),
        ("io.opentelemetry.grpc-1.6", "2.10.0-alpha"),
        ("io.opentelemetry.jdbc", "2.10.0-alpha"),
        ("io.opentelemetry.kafka-clients-2.6", "2.10.0-alpha"),
        (
            "org.springframework.web.servlet.DispatcherServlet",
            "com.zaxxer.hikari.HikariDataSource",
            "org.hibernate.SQL",
            "org.apache.kafka.clients.consumer.KafkaConsumer",
        ),
        ("io.opentelemetry.runtime-telemetry-java17", "2.10.0-alpha"),
        _JAVA_SEV,
        (*(f"http-nio-8080-exec-{i}" for i in range(1, 41)), "main", "scheduling-1", "kafka-consumer-1"),
    ),
    "go": Language(
        "go",
        "1.31.0",
        ("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", "0.56.0"),
        ("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", "0.56.0"),
        ("go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc", "0.56.0"),
        ("github.com/XSAM/otelsql", "0.35.0"),
        ("github.com/IBM/sarama/otelsarama", "0.43.0"),
        ("go.opentelemetry.io/contrib/bridges/otelslog", "go.opentelemetry.io/contrib/bridges/otelzap"),
        ("go.opentelemetry.io/contrib/instrumentation/runtime", "0.56.0"),
        _LOWER_SEV,
        ("",),
    ),
    "python": Language(
        "python",
        "1.27.0",
        ("opentelemetry.instrumentation.flask", "0.48b0"),
        ("opentelemetry.instrumentation.requests", "0.48b0"),
        ("opentelemetry.instrumentation.grpc", "0.48b0"),
        ("opentelemetry.instrumentation.psycopg2", "0.48b0"),
        ("opentelemetry.instrumentation.confluent_kafka", "0.48b0"),
        ("app.handlers", "app.services", "app.repository", "werkzeug", "urllib3.connectionpool"),
        ("opentelemetry.instrumentation.system_metrics", "0.48b0"),
        {5: "DEBUG", 9: "INFO", 13: "WARNING", 17: "ERROR", 21: "CRITICAL"},
        ("MainThread", "ThreadPoolExecutor-0_0", "ThreadPoolExecutor-0_1", "ThreadPoolExecutor-0_2"),
    ),
    "nodejs": Language(
        "nodejs",
        "1.26.0",
        ("@opentelemetry/instrumentation-http", "0.53.0"),
        ("@opentelemetry/instrumentation-undici", "0.6.0"),
        ("@opentelemetry/instrumentation-grpc", "0.53.0"),
        ("@opentelemetry/instrumentation-pg", "0.45.1"),
        ("@opentelemetry/instrumentation-kafkajs", "0.3.0"),
        ("@opentelemetry/winston-transport", "@opentelemetry/instrumentation-pino"),
        ("@opentelemetry/host-metrics", "0.35.3"),
        _LOWER_SEV,
        ("",),
    ),
    "dotnet": Language(
        "dotnet",
        "1.9.0",
        ("Microsoft.AspNetCore", ""),
        ("System.Net.Http", ""),
        ("Grpc.Net.Client", ""),
        ("Npgsql", "8.0.5"),
        ("Confluent.Kafka.Extensions.OpenTelemetry", "0.4.0"),
        ("Microsoft.AspNetCore.Hosting.Diagnostics", "Microsoft.EntityFrameworkCore.Database.Command", "Program"),
        ("OpenTelemetry.Instrumentation.Runtime", "1.9.0"),
        {5: "Debug", 9: "Information", 13: "Warning", 17: "Error", 21: "Critical"},
        (".NET ThreadPool Worker", ".NET TP Worker", "Main Thread"),
    ),
    "rust": Language(
        "rust",
        "0.26.0",
        ("tracing-opentelemetry", "0.27.0"),
        ("reqwest-tracing", "0.5.4"),
        ("tonic-tracing-opentelemetry", "0.21.1"),
        ("sqlx", "0.8.2"),
        ("rdkafka", "0.36.2"),
        ("opentelemetry-appender-tracing",),
        ("opentelemetry-system-metrics", "0.3.0"),
        {5: "DEBUG", 9: "INFO", 13: "WARN", 17: "ERROR", 21: "ERROR"},
        ("tokio-runtime-worker", "main"),
    ),
}


@dataclass(frozen=True)
class ServiceSpec:
    """One service of the simulated system."""

    name: str
    language: str
    protocol: str  # "http", "grpc" or "kafka" (a consumer)
    nouns: tuple[str, ...]  # resources its API exposes
    db: tuple[str, str] | None  # (db.system, database name)
    calls: tuple[str, ...]  # services it calls
    namespace: str


SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("frontend", "nodejs", "http", ("product", "cart", "order", "page"), None,
                ("product-catalog", "cart-service", "checkout-service", "recommendation-service", "ad-service",
                 "currency-service", "session-service", "search-service"), "shop"),
    ServiceSpec("api-gateway", "go", "http", ("account", "order", "product", "payment"), None,
                ("auth-service", "user-service", "order-service", "inventory-service", "billing-service"), "edge"),
    ServiceSpec("auth-service", "go", "grpc", ("token", "session"), ("redis", "0"), ("user-service",), "identity"),
    ServiceSpec("user-service", "java", "http", ("user", "profile", "address"), ("postgresql", "users"), (), "identity"),
    ServiceSpec("account-service", "java", "http", ("account", "preference"), ("postgresql", "accounts"),
                ("user-service", "audit-log"), "identity"),
    ServiceSpec("session-service", "go", "grpc", ("session",), ("redis", "1"), (), "identity"),
    ServiceSpec("cart-service", "dotnet", "grpc", ("cart", "item"), ("redis", "0"), ("product-catalog",), "shop"),
    ServiceSpec("checkout-service", "go", "grpc", ("checkout", "order"), None,
                ("cart-service", "payment-service", "shipping-service", "currency-service", "email-service",
                 "tax-service", "order-service"), "shop"),
    ServiceSpec("payment-service", "nodejs", "grpc", ("payment", "charge", "refund"), ("postgresql", "payments"),
                ("billing-service",), "payments"),
    ServiceSpec("currency-service", "rust", "grpc", ("currency", "rate"), None, (), "shop"),
    ServiceSpec("shipping-service", "rust", "grpc", ("shipment", "quote"), ("postgresql", "shipping"),
                ("warehouse-service",), "fulfillment"),
    ServiceSpec("product-catalog", "go", "grpc", ("product", "category"), ("postgresql", "catalog"),
                ("pricing-service", "feature-flags"), "shop"),
    ServiceSpec("recommendation-service", "python", "grpc", ("recommendation",), ("redis", "2"),
                ("product-catalog", "feature-flags"), "shop"),
    ServiceSpec("ad-service", "java", "grpc", ("ad", "campaign"), None, ("feature-flags",), "marketing"),
    ServiceSpec("email-service", "python", "http", ("email", "template"), None, (), "notifications"),
    ServiceSpec("inventory-service", "java", "http", ("stock", "reservation", "sku"), ("postgresql", "inventory"),
                ("warehouse-service",), "fulfillment"),
    ServiceSpec("order-service", "java", "http", ("order", "line-item", "invoice"), ("postgresql", "orders"),
                ("inventory-service", "pricing-service", "audit-log"), "shop"),
    ServiceSpec("fulfillment-worker", "python", "kafka", ("orders",), ("postgresql", "fulfillment"),
                ("shipping-service", "warehouse-service", "notification-service"), "fulfillment"),
    ServiceSpec("notification-service", "nodejs", "http", ("notification", "subscription"), ("mongodb", "notify"),
                ("email-service",), "notifications"),
    ServiceSpec("search-service", "java", "http", ("search", "suggestion"), ("elasticsearch", "products"),
                ("product-catalog",), "shop"),
    ServiceSpec("pricing-service", "go", "grpc", ("price", "discount"), ("redis", "3"), ("feature-flags",), "shop"),
    ServiceSpec("fraud-detection", "java", "kafka", ("payments",), ("postgresql", "fraud"), (), "payments"),
    ServiceSpec("accounting-service", "dotnet", "kafka", ("orders",), ("postgresql", "ledger"), (), "payments"),
    ServiceSpec("review-service", "python", "http", ("review", "rating"), ("postgresql", "reviews"),
                ("user-service",), "shop"),
    ServiceSpec("image-service", "go", "http", ("image", "thumbnail"), None, (), "shop"),
    ServiceSpec("feature-flags", "go", "grpc", ("flag",), ("postgresql", "flags"), (), "platform"),
    ServiceSpec("loyalty-service", "java", "http", ("reward", "points"), ("postgresql", "loyalty"),
                ("user-service",), "marketing"),
    ServiceSpec("tax-service", "python", "grpc", ("tax",), None, (), "payments"),
    ServiceSpec("warehouse-service", "java", "http", ("warehouse", "bin", "pick-list"), ("postgresql", "warehouse"),
                (), "fulfillment"),
    ServiceSpec("billing-service", "java", "http", ("invoice", "subscription"), ("postgresql", "billing"),
                ("tax-service", "audit-log"), "payments"),
    ServiceSpec("audit-log", "go", "http", ("event",), ("elasticsearch", "audit"), (), "platform"),
    ServiceSpec("report-generator", "python", "http", ("report", "export"), ("postgresql", "warehouse_ro"),
                ("image-service", "audit-log"), "platform"),
)

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-2")
KAFKA_TOPICS = {"fulfillment-worker": "orders", "fraud-detection": "payments", "accounting-service": "orders"}

HTTP_METHOD_WEIGHTS = (("GET", 70.0), ("POST", 18.0), ("PUT", 7.0), ("DELETE", 3.0), ("PATCH", 2.0))

DB_OPERATIONS = {
    "postgresql": (
        ("SELECT", "SELECT * FROM {table} WHERE id = $1"),
        ("SELECT", "SELECT id, status, updated_at FROM {table} WHERE owner_id = $1 ORDER BY updated_at DESC LIMIT $2"),
        ("SELECT", "SELECT count(*) FROM {table} WHERE status = $1"),
        ("INSERT", "INSERT INTO {table} (id, owner_id, status, payload) VALUES ($1, $2, $3, $4)"),
        ("UPDATE", "UPDATE {table} SET status = $1, updated_at = now() WHERE id = $2"),
        ("DELETE", "DELETE FROM {table} WHERE id = $1"),
    ),
    "redis": (
        ("GET", "GET {table}:?"),
        ("SET", "SET {table}:? ? EX ?"),
        ("HGETALL", "HGETALL {table}:?"),
        ("EXPIRE", "EXPIRE {table}:? ?"),
        ("MGET", "MGET {table}:? {table}:?"),
    ),
    "mongodb": (
        ("find", '{{"find": "{table}", "filter": {{"user_id": "?"}}}}'),
        ("insert", '{{"insert": "{table}", "documents": "?"}}'),
        ("update", '{{"update": "{table}", "updates": "?"}}'),
    ),
    "elasticsearch": (
        ("search", "GET /{table}/_search"),
        ("index", "PUT /{table}/_doc/?"),
        ("bulk", "POST /_bulk"),
    ),
}

DB_PEERS = {
    "postgresql": ("pg-primary.db.svc.cluster.local", 5432),
    "redis": ("redis-master.cache.svc.cluster.local", 6379),
    "mongodb": ("mongo-0.mongo.db.svc.cluster.local", 27017),
    "elasticsearch": ("es-client.search.svc.cluster.local", 9200),
}

INTERNAL_OPERATIONS = (
    "validate{Noun}", "load{Noun}", "serialize{Noun}", "cache.lookup", "render", "authorize", "compute{Noun}Price",
    "apply{Noun}Rules", "map{Noun}Dto",
)

EXCEPTIONS = {
    "java": (
        ("java.net.SocketTimeoutException", "Read timed out"),
        ("org.postgresql.util.PSQLException", "ERROR: deadlock detected"),
        ("java.lang.IllegalStateException", "{Noun} {id} is not in a valid state"),
        ("java.lang.NullPointerException", 'Cannot invoke "String.length()" because "value" is null'),
    ),
    "go": (
        ("*net.OpError", "dial tcp 10.0.12.7:5432: connect: connection refused"),
        ("context.deadlineExceededError", "context deadline exceeded"),
        ("*errors.errorString", "{noun} {id} not found"),
    ),
    "python": (
        ("psycopg2.errors.UniqueViolation", 'duplicate key value violates unique constraint "{noun}_pkey"'),
        ("requests.exceptions.ConnectionError", "Max retries exceeded with url: /api/v1/{noun}s/{id}"),
        ("KeyError", "'{noun}_id'"),
        ("TimeoutError", "timed out"),
    ),
    "nodejs": (
        ("Error", "connect ECONNREFUSED 10.0.14.2:50051"),
        ("TypeError", "Cannot read properties of undefined (reading '{noun}Id')"),
        ("PaymentDeclinedError", "card declined for {noun} {id}"),
    ),
    "dotnet": (
        ("System.TimeoutException", "The operation has timed out."),
        ("StackExchange.Redis.RedisConnectionException", "No connection is active/available to service this operation"),
        ("System.InvalidOperationException", "Sequence contains no elements"),
    ),
    "rust": (
        ("std::io::Error", "connection reset by peer (os error 104)"),
        ("sqlx::Error", "pool timed out while waiting for an open connection"),
    ),
}

STACK_FRAMES = {
    "java": "\tat com.example.{svc}.{Noun}Service.handle({Noun}Service.java:{line})\n"
    "\tat com.example.{svc}.{Noun}Controller.invoke({Noun}Controller.java:{line2})\n"
    "\tat org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet.java:885)\n"
    "\tat jakarta.servlet.http.HttpServlet.service(HttpServlet.java:658)\n"
    "\tat org.apache.catalina.core.ApplicationFilterChain.doFilter(ApplicationFilterChain.java:140)\n",
    "go": "goroutine {line} [running]:\nmain.(*{Noun}Handler).Serve(0xc000{hex})\n"
    "\t/app/internal/{noun}/handler.go:{line2} +0x1a4\nnet/http.HandlerFunc.ServeHTTP(...)\n"
    "\t/usr/local/go/src/net/http/server.go:2220\n",
    "python": 'Traceback (most recent call last):\n  File "/app/app/services/{noun}.py", line {line}, in handle\n'
    '    result = self.repository.get({noun}_id)\n  File "/app/app/repository.py", line {line2}, in get\n'
    "    return self.session.execute(query).one()\n",
    "nodejs": "    at {Noun}Client.call (/app/src/clients/{noun}.js:{line}:17)\n"
    "    at async Router.handle (/app/src/routes/{noun}.js:{line2}:9)\n"
    "    at async /app/node_modules/express/lib/router/index.js:284:7\n",
    "dotnet": "   at Example.{Noun}Service.HandleAsync(Guid id) in /src/{Noun}Service.cs:line {line}\n"
    "   at Example.{Noun}Controller.Get(Guid id) in /src/{Noun}Controller.cs:line {line2}\n",
    "rust": "   0: {svc}::{noun}::handle\n             at ./src/{noun}.rs:{line}:13\n   1: tokio::runtime::task::raw::poll\n",
}

# Log templates: (severity number, template, attribute kind). Fields in braces are filled per record;
# "kind" selects the attributes that accompany the record (see logs.py).
LOG_TEMPLATES: tuple[tuple[int, str, str, float], ...] = (
    (9, '{client_ip} - - "{method} {path} HTTP/1.1" {status} {bytes} {duration_ms}ms', "access", 30.0),
    (9, "Request {request_id} completed in {duration_ms} ms", "request", 10.0),
    (9, "User {user} logged in from {client_ip}", "user", 4.0),
    (9, "Processed {noun} {id} for user {user} in {duration_ms} ms", "user", 8.0),
    (9, "Published event {noun}.{verb} for {noun} {id} to topic {topic}", "messaging", 4.0),
    (9, "Consumed {count} records from partition {partition} at offset {offset}", "messaging", 3.0),
    (9, "Connection pool stats: active={active}, idle={idle}, waiting={waiting}", "plain", 2.0),
    (9, "Scheduled job {job} finished in {duration_ms} ms", "plain", 1.0),
    (5, "Cache {hit_miss} for key {noun}:{id}", "debug", 8.0),
    (5, "Evaluated feature flag {flag} for user {user}: {bool}", "debug", 3.0),
    (5, "Executing query on {table} with {count} parameters", "debug", 3.0),
    (5, "Outgoing request {method} {upstream_url} took {duration_ms} ms", "debug", 3.0),
    (13, "Slow query on {table}: {duration_ms} ms exceeded threshold of 500 ms", "warn", 2.0),
    (13, "Retrying request to {upstream} (attempt {attempt}/3) after {error_short}", "warn", 2.0),
    (13, "Rate limit approaching for client {client_ip}: {count} requests in the last minute", "warn", 1.0),
    (13, "Deprecated API {method} {path} called by {user_agent_short}", "warn", 0.5),
    (17, "Failed to process {noun} {id}: {error_message}", "error", 1.2),
    (17, "Request {request_id} failed with status {status_5xx}: {error_short}", "error", 0.8),
    (17, "Unhandled exception while handling {method} {path}", "exception", 0.6),
    (21, "Shutting down: unrecoverable error in {noun} processor", "error", 0.01),
)

EVENT_NAMES = ("session.start", "session.end", "feature_flag.evaluation", "browser.page_view",
               "device.app.lifecycle", "order.status_changed")

FEATURE_FLAGS = ("new-checkout-flow", "recommendations-v2", "dark-mode", "free-shipping-banner",
                 "fraud-model-v3", "product-ab-test", "cart-persistence", "one-click-buy")

USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
    "Mozilla/5.0 (X11; Linux x86_64; rv:131.0) Gecko/20100101 Firefox/131.0",
    "okhttp/4.12.0",
    "python-requests/2.32.3",
    "Go-http-client/1.1",
    "kube-probe/1.30",
)

ERRORS_SHORT = ("connection refused", "timeout after 5000 ms", "503 Service Unavailable", "connection reset by peer",
                "upstream request timeout", "EOF")

FIRST_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
               "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "yara", "zoe", "liam",
               "noah", "emma", "ava", "mia", "lucas", "mateo", "aria", "leo")
LAST_NAMES = ("smith", "jones", "garcia", "mueller", "rossi", "kim", "nguyen", "silva", "kowalski", "tanaka",
              "dubois", "novak", "larsen", "ivanova", "okafor", "patel", "cohen", "murphy", "schmidt", "lopez")

VERBS = ("created", "updated", "deleted", "shipped", "paid", "cancelled")
JOBS = ("cleanup-expired-sessions", "rebuild-search-index", "sync-exchange-rates", "send-digest-emails",
        "compact-audit-log")
