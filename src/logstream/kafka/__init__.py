"""Apache Kafka for logstream: the Spark connector's jars, a local broker, and a small client.

* :mod:`logstream.kafka.maven` fetches Java artifacts from Maven Central once into a cache
  (``~/.cache/logstream/maven``): Spark's Kafka connector, put on the classpath of a session
  that reads or writes Kafka (:func:`logstream.session.get_spark`), and Apache Kafka itself;
* :mod:`logstream.kafka.broker` starts and stops a one-node Kafka broker in KRaft mode on the
  loopback interface (``make kafka``, the tests, the benchmarks);
* :mod:`logstream.kafka.client` is the Python side (``confluent-kafka``): topics, their
  offsets, the records of a topic, and the deletion that retention does.

The Kafka source is :mod:`logstream.sources.kafka`, the sink :mod:`logstream.sinks.kafka`, and
``logstream replay --kafka`` publishes with :class:`logstream.replay.kafka.KafkaLineSink`.
Guarantees and commands: ``docs/kafka.md``.
"""
