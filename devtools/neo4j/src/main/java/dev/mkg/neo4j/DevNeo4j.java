package dev.mkg.neo4j;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.graphdb.QueryExecutionException;

/**
 * Starts Neo4j Community embedded with Bolt on 127.0.0.1, for tests, CI and the demo, hardened
 * like every Neo4j MKG starts: no file URLs or remote URLs for LOAD CSV, no extension procedures, a
 * per-transaction memory cap.
 *
 * <p>Configured by environment variables: NEO4J_DEV_HOME (store and logs), NEO4J_DEV_PORT (Bolt
 * port), NEO4J_DEV_PASSWORD (empty turns authentication off) and NEO4J_DEV_PAGECACHE. Prints
 * {@code NEO4J_DEV_READY bolt://127.0.0.1:PORT} once both databases answer, and shuts down
 * cleanly on SIGTERM or SIGINT.
 */
public final class DevNeo4j {
    private DevNeo4j() {}

    public static void main(String[] args) {
        try {
            run();
        } catch (Throwable e) {
            e.printStackTrace();
            System.out.println("NEO4J_DEV_FAILED " + e);
            System.out.flush();
            System.exit(1);
        }
    }

    private static void run() throws Exception {
        Path home = Path.of(env("NEO4J_DEV_HOME", "neo4j-dev-home")).toAbsolutePath();
        int port = Integer.parseInt(env("NEO4J_DEV_PORT", "7687"));
        String password = env("NEO4J_DEV_PASSWORD", "");
        if (!password.isEmpty() && password.length() < 8) {
            throw new IllegalArgumentException("NEO4J_DEV_PASSWORD must have at least 8 characters");
        }
        Files.createDirectories(home);
        Path conf = writeConfig(home, port, !password.isEmpty(), env("NEO4J_DEV_PAGECACHE", "256m"));

        DatabaseManagementService dbms =
                new DatabaseManagementServiceBuilder(home).loadPropertiesFromFile(conf).build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("NEO4J_DEV_STOPPING");
            System.out.flush();
            dbms.shutdown();
            stopped.countDown();
        }, "neo4j-dev-shutdown"));

        GraphDatabaseService system = dbms.database("system");
        GraphDatabaseService neo4j = dbms.database("neo4j");
        if (!system.isAvailable(120_000) || !neo4j.isAvailable(120_000)) {
            throw new IllegalStateException("databases did not become available within 120 s");
        }
        if (!password.isEmpty()) {
            setPassword(system, password);
        }
        neo4j.executeTransactionally("RETURN 1");
        System.out.println("NEO4J_DEV_READY bolt://127.0.0.1:" + port);
        System.out.flush();
        stopped.await();
    }

    /** Sets the password of user neo4j; a restart on an existing store may find it set already. */
    private static void setPassword(GraphDatabaseService system, String password) {
        try {
            system.executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $pw CHANGE NOT REQUIRED", Map.of("pw", password));
        } catch (QueryExecutionException e) {
            if (e.getMessage() == null || !e.getMessage().contains("cannot be the same")) {
                throw e;
            }
        }
    }

    private static Path writeConfig(Path home, int port, boolean auth, String pageCache)
            throws IOException {
        String address = "127.0.0.1:" + port;
        String text = String.join("\n",
                "server.bolt.enabled=true",
                "server.bolt.listen_address=" + address,
                "server.bolt.advertised_address=" + address,
                "dbms.security.auth_enabled=" + auth,
                "server.memory.pagecache.size=" + pageCache,
                "db.query.default_language=CYPHER_25",
                "db.tx_log.preallocate=false",
                "db.tx_log.rotation.retention_policy=1 files",
                "db.transaction.timeout=120s",
                // Hardening (docs/security.md): LOAD CSV reads no file outside the (empty) import
                // folder and fetches no URL, no extension procedure loads, one transaction cannot
                // take the server's memory, and nothing phones home.
                "dbms.security.allow_csv_import_from_file_urls=false",
                "server.directories.import=import",
                "internal.dbms.cypher_ip_blocklist=0.0.0.0/0,::/0",
                "dbms.security.procedures.allowlist=",
                "db.memory.transaction.max=256m",
                "db.memory.transaction.total.max=512m",
                "dbms.memory.transaction.total.max=512m",
                "dbms.usage_report.enabled=false",
                "server.fleet_discovery.enabled=false",
                "dbms.fleet_manager.enabled=false",
                // Stop in about a second instead of waiting twice 5 s for Bolt connections.
                "internal.server.bolt.connection_shutdown_wait_time=0s",
                "internal.server.bolt.thread_pool_shutdown_wait_time=0s",
                "");
        Path conf = home.resolve("neo4j-dev.conf");
        Files.writeString(conf, text, StandardCharsets.UTF_8);
        return conf;
    }

    private static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }
}
