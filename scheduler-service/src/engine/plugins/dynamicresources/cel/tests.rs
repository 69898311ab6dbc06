//! The libraries of the DRA selector environment, with cases from kube's and cel-go's own
//! library tests (`k8s.io/apiserver/pkg/cel/library/*_test.go`, cel-go `ext/*_test.go`), and
//! each costly function's cost against kube's limit.

use std::collections::BTreeMap;

use super::{CelError, SelectorCache};
use crate::engine::devices::{AttributeValue, Device};

fn device() -> Device {
    let mut attributes = BTreeMap::new();
    attributes.insert(
        "dra.example.com/model".to_string(),
        AttributeValue::String("A100-SXM4".into()),
    );
    attributes.insert(
        "dra.example.com/endpoint".to_string(),
        AttributeValue::String("https://gpu.example.com:8443/v1/x?zone=a&zone=b".into()),
    );
    attributes.insert(
        "dra.example.com/ip".to_string(),
        AttributeValue::String("10.0.3.7".into()),
    );
    attributes.insert(
        "dra.example.com/slot".to_string(),
        AttributeValue::String("pcie-slot-3".into()),
    );
    attributes.insert("dra.example.com/cores".to_string(), AttributeValue::Int(108));
    Device {
        name: "gpu-0".into(),
        attributes,
        ..Default::default()
    }
}

fn eval(expr: &str) -> Result<bool, CelError> {
    SelectorCache::new().matches(expr, "dra.example.com", &device())
}

/// Each expression is true.
fn all_true(exprs: &[&str]) {
    let failed: Vec<String> = exprs
        .iter()
        .filter_map(|e| match eval(e) {
            Ok(true) => None,
            other => Some(format!("{e}: {other:?}")),
        })
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The runtime error `expr` fails with.
fn runtime_error(expr: &str) -> String {
    match eval(expr) {
        Err(CelError::Runtime(m)) => m,
        other => panic!("{expr}: expected a runtime error, got {other:?}"),
    }
}

const COST_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

#[test]
fn cel_bind() {
    // cel-go ext/bindings_test.go and kube's DRA example.
    all_true(&[
        "cel.bind(a, 'hello', cel.bind(b, 'world', a + b + b + a)) == 'helloworldworldhello'",
        "cel.bind(a, [1, 2, 3], a.size() == 3 && a[0] == 1)",
        "cel.bind(dra, device.attributes['dra.example.com'], dra.model == 'A100-SXM4' && dra.cores > 100)",
        // A binding shadows an outer one of the same name only within its expression.
        "cel.bind(x, 1, cel.bind(x, 2, x) + x) == 3",
    ]);
    match eval("cel.bind(a.b, 1, true)") {
        Err(CelError::Compile(m)) => assert!(
            m.contains("cel.bind() variable names must be simple identifiers"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    // `bind` on anything but `cel` is no macro.
    assert!(eval("[1].bind(a, 1, true)").is_err());
}

#[test]
fn two_variable_comprehensions() {
    // cel-go ext/comprehensions_test.go.
    all_true(&[
        "[1, 2, 3].all(i, v, i < v)",
        "!([1, 2, 3].all(i, v, i > 0))",
        "[3, 1, 1].exists(i, v, i == v)",
        "!([3, 2, 1].exists(i, v, i == v))",
        "[1, 2, 1].existsOne(i, v, v == 2)",
        "!([1, 1].existsOne(i, v, v == 1))",
        "{'a': 1, 'b': 2}.all(k, v, k.size() == 1 && v > 0)",
        "{'a': 1, 'b': 2}.exists(k, v, k == 'b' && v == 2)",
        "[1, 2, 3].transformList(i, v, v * i) == [0, 2, 6]",
        "[1, 2, 3].transformList(i, v, i > 0, v * 2) == [4, 6]",
        "{'greeting': 'hello'}.transformList(k, v, k + ' ' + v) == ['greeting hello']",
        "[1, 2].transformMap(i, v, v * 10) == {0: 10, 1: 20}",
        "{'a': 1, 'b': 2}.transformMap(k, v, v > 1, k + string(v)) == {'b': 'b2'}",
        "{'a': 'x', 'b': 'y'}.transformMapEntry(k, v, {v: k}) == {'x': 'a', 'y': 'b'}",
        "device.attributes['dra.example.com'].exists(k, v, k == 'cores' && v == 108)",
    ]);
    let m = runtime_error("{'a': 'x', 'b': 'x'}.transformMapEntry(k, v, {v: k}).size() == 2");
    assert!(m.contains("insert failed: key") && m.contains("already exists"), "{m}");
}

#[test]
fn strings_extension() {
    // cel-go ext/strings_test.go (version 2).
    all_true(&[
        "'tacocat'.charAt(3) == 'o'",
        "'tacocat'.indexOf('a') == 1",
        "'tacocat'.lastIndexOf('at') == 5",
        "'TacoCat'.lowerAscii() == 'tacocat'",
        "'TacoCat'.upperAscii() == 'TACOCAT'",
        "'12 days 12 hours'.replace('{0}', '2') == '12 days 12 hours'",
        "'{0} days {0} hours'.replace('{0}', '2', 1) == '2 days {0} hours'",
        "'hello world'.split(' ') == ['hello', 'world']",
        "'a,b,c'.split(',', 2) == ['a', 'b,c']",
        "'tacocat'.substring(4) == 'cat'",
        "'tacocat'.substring(0, 4) == 'taco'",
        "'  \\ttrim\\n   '.trim() == 'trim'",
        "['x', 'y'].join() == 'xy'",
        "['x', 'y'].join('-') == 'x-y'",
        "strings.quote('single-quote with \"double quote\"') == '\"single-quote with \\\\\"double quote\\\\\"\"'",
        "'%s is %d'.format(['x', 1]) == 'x is 1'",
        "device.attributes['dra.example.com'].model.lowerAscii().startsWith('a100')",
        "device.attributes['dra.example.com'].slot.split('-')[2] == '3'",
    ]);
    assert!(runtime_error("'tacocat'.charAt(30) == ''").contains("index out of range: 30"));
}

#[test]
fn strings_extension_as_cel_go_tests_it() {
    // cel-go ext/strings_test.go's table (the functions of version 2, `format` and `quote` aside),
    // as written there.
    all_true(&[
        r#"'tacocat'.charAt(3) == 'o'"#,
        r#"'tacocat'.charAt(7) == ''"#,
        r#"'©αT'.charAt(0) == '©' && '©αT'.charAt(1) == 'α' && '©αT'.charAt(2) == 'T'"#,
        r#"'tacocat'.indexOf('') == 0"#,
        r#"'tacocat'.indexOf('ac') == 1"#,
        r#"'tacocat'.indexOf('none') == -1"#,
        r#"'tacocat'.indexOf('', 3) == 3"#,
        r#"'tacocat'.indexOf('a', 3) == 5"#,
        r#"'tacocat'.indexOf('at', 3) == 5"#,
        r#"'ta©o©αT'.indexOf('©') == 2"#,
        r#"'ta©o©αT'.indexOf('©', 3) == 4"#,
        r#"'ta©o©αT'.indexOf('©αT', 3) == 4"#,
        r#"'ta©o©αT'.indexOf('©α', 5) == -1"#,
        r#"'ijk'.indexOf('k') == 2"#,
        r#"'hello wello'.indexOf('hello wello') == 0"#,
        r#"'hello wello'.indexOf('ello', 6) == 7"#,
        r#"'hello wello'.indexOf('elbo room!!') == -1"#,
        r#"'hello wello'.indexOf('elbo room!!!') == -1"#,
        r#"''.lastIndexOf('@@') == -1"#,
        r#"'tacocat'.lastIndexOf('') == 7"#,
        r#"'tacocat'.lastIndexOf('at') == 5"#,
        r#"'tacocat'.lastIndexOf('none') == -1"#,
        r#"'tacocat'.lastIndexOf('', 3) == 3"#,
        r#"'tacocat'.lastIndexOf('a', 3) == 1"#,
        r#"'ta©o©αT'.lastIndexOf('©') == 4"#,
        r#"'ta©o©αT'.lastIndexOf('©', 3) == 2"#,
        r#"'ta©o©αT'.lastIndexOf('©α', 4) == 4"#,
        r#"'hello wello'.lastIndexOf('ello', 6) == 1"#,
        r#"'hello wello'.lastIndexOf('low') == -1"#,
        r#"'hello wello'.lastIndexOf('elbo room!!') == -1"#,
        r#"'hello wello'.lastIndexOf('elbo room!!!') == -1"#,
        r#"'hello wello'.lastIndexOf('hello wello') == 0"#,
        r#"'bananananana'.lastIndexOf('nana', 7) == 6"#,
        r#"'TacoCat'.lowerAscii() == 'tacocat'"#,
        r#"'TacoCÆt'.lowerAscii() == 'tacocÆt'"#,
        r#"'TacoCÆt Xii'.lowerAscii() == 'tacocÆt xii'"#,
        r#""12 days 12 hours".replace("{0}", "2") == "12 days 12 hours""#,
        r#""{0} days {0} hours".replace("{0}", "2") == "2 days 2 hours""#,
        r#""{0} days {0} hours".replace("{0}", "2", 1).replace("{0}", "23") == "2 days 23 hours""#,
        r#""1 ©αT taco".replace("αT", "o©α") == "1 ©o©α taco""#,
        r#""hello hello".replace("", "_") == "_h_e_l_l_o_ _h_e_l_l_o_""#,
        r#""hello hello".replace("h", "") == "ello ello""#,
        r#""hello world".split(" ") == ["hello", "world"]"#,
        r#""hello world events!".split(" ", 0) == []"#,
        r#""hello world events!".split(" ", 1) == ["hello world events!"]"#,
        r#""o©o©o©o".split("©", -1) == ["o", "o", "o", "o"]"#,
        r#""tacocat".substring(4) == "cat""#,
        r#""tacocat".substring(7) == """#,
        r#""tacocat".substring(0, 4) == "taco""#,
        r#""tacocat".substring(4, 4) == """#,
        r#"'ta©o©αT'.substring(2, 6) == "©o©α""#,
        r#"'ta©o©αT'.substring(7, 7) == """#,
        r#"" \f\n\r\t\vtext  ".trim() == "text""#,
        r#""\u0085\u00a0\u1680text".trim() == "text""#,
        r#""text\u2000\u2001\u2002\u2003\u2004\u2004\u2006\u2007\u2008\u2009".trim() == "text""#,
        r#""\u200atext\u2028\u2029\u202F\u205F\u3000".trim() == "text""#,
        r#"'tacoCat'.upperAscii() == 'TACOCAT'"#,
        r#"'tacoCαt'.upperAscii() == 'TACOCαT'"#,
        r#"['x', 'y'].join() == 'xy'"#,
        r#"['x', 'y'].join('-') == 'x-y'"#,
        r#"[].join() == ''"#,
        r#"[].join('-') == ''"#,
        r#"'tacocat'.indexOf('a', 30) == -1"#,
        r#"'tacocat'.indexOf('', 7) == 7"#,
        r#"'tacocat'.indexOf('', 30) == 7"#,
        r#"'tacocat'.lastIndexOf('a', 30) == -1"#,
        r#"'tacocat'.lastIndexOf('', 7) == 7"#,
        r#"'tacocat'.lastIndexOf('', 30) == 7"#,
    ]);
}

#[test]
fn strings_extension_errors_as_cel_go_words_them() {
    // cel-go ext/strings_test.go's error cases.
    for (expr, message) in [
        ("'tacocat'.charAt(30) == ''", "index out of range: 30"),
        ("'tacocat'.indexOf('', -1) == 0", "index out of range: -1"),
        ("'tacocat'.lastIndexOf('a', -1) == -1", "index out of range: -1"),
        ("'tacocat'.lastIndexOf('', -1) == 0", "index out of range: -1"),
        ("'tacocat'.substring(40) == 'cat'", "index out of range: 40"),
        ("'tacocat'.substring(-1) == 'cat'", "index out of range: -1"),
        ("'tacocat'.substring(1, 50) == 'cat'", "index out of range: 50"),
        ("'tacocat'.substring(49, 50) == 'cat'", "index out of range: 49"),
        (
            "'tacocat'.substring(4, 3) == ''",
            "invalid substring range. start: 4, end: 3",
        ),
    ] {
        assert_eq!(runtime_error(expr), message, "{expr}");
    }
}

#[test]
fn comprehensions_over_the_attribute_domains() {
    // The outer `device.attributes` map (its missing domains empty maps) iterates as a map.
    all_true(&[
        "device.attributes.exists(d, m, d == 'dra.example.com' && m.model == 'A100-SXM4')",
        "device.attributes.all(d, m, m.size() > 0)",
        "device.attributes['dra.example.com'].transformList(k, v, k).sort() == ['cores', 'endpoint', 'ip', 'model', 'slot']",
    ]);
}

#[test]
fn kubernetes_lists_library() {
    // kube's library/lists.go (version 1), cases of its documentation and tests.
    all_true(&[
        "[1, 2, 3].isSorted()",
        "!(['c', 'b', 'a'].isSorted())",
        "[].isSorted()",
        "[1, 2, 3].sum() == 6",
        "[1.0, 2.5].sum() == 3.5",
        "[].sum() == 0",
        "[1, 3, 2].max() == 3",
        "['b', 'a'].min() == 'a'",
        "[1, 2, 2, 3].indexOf(2) == 1",
        "[1, 2, 2, 3].lastIndexOf(2) == 2",
        "['a'].indexOf('b') == -1",
        "[1, 2, 3].includes(2)",
        "!([1, 2, 3].includes(4))",
        "[1, 2].includes(2.0)",
    ]);
    assert!(runtime_error("[].max() == 0").contains("max called on empty list"));
    assert!(runtime_error("[].min() == 0").contains("min called on empty list"));
    assert!(runtime_error("[9223372036854775807, 1].sum() == 0").contains("overflow"));
}

#[test]
fn lists_extension() {
    // cel-go ext/lists_test.go (version 3).
    all_true(&[
        "[1, 2, 3, 4].slice(1, 3) == [2, 3]",
        "[1, [2, 3], [4]].flatten() == [1, 2, 3, 4]",
        "[1, [2, [3, 4]]].flatten() == [1, 2, [3, 4]]",
        "[1, [2, [3, [4]]]].flatten(2) == [1, 2, 3, [4]]",
        "[1, 2, 2, 3, 3, 3].distinct() == [1, 2, 3]",
        "[5, 3, 1, 2].reverse() == [2, 1, 3, 5]",
        "[3, 2, 1].sort() == [1, 2, 3]",
        "['b', 'c', 'a'].sort() == ['a', 'b', 'c']",
        "[{'n': 2}, {'n': 1}].sortBy(e, e.n) == [{'n': 1}, {'n': 2}]",
        "lists.range(4) == [0, 1, 2, 3]",
    ]);
    assert!(runtime_error("[1, [2, [3, [4]]]].flatten(-1) == []").contains("negative"));
}

#[test]
fn sets_extension() {
    // cel-go ext/sets_test.go.
    all_true(&[
        "sets.contains([], [])",
        "sets.contains([1, 2, 3], [3, 1])",
        "sets.contains([1, 2], [1.0])",
        "!sets.contains([1, 2], [2, 3])",
        "sets.equivalent([1, 2, 3], [3, 2, 1, 1])",
        "!sets.equivalent([1, 2], [1, 2, 3])",
        "sets.intersects([1, 2], [2, 3])",
        "!sets.intersects([], [1])",
        "sets.contains(['A100-SXM4', 'H100'], [device.attributes['dra.example.com'].model])",
    ]);
}

#[test]
fn regex_library() {
    // kube's library/regex.go documentation.
    all_true(&[
        "'abc 123'.find('[0-9]+') == '123'",
        "'abc 123'.find('xyz') == ''",
        "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
        "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
        "'123 abc 456'.findAll('xyz') == []",
        "'123 abc 456'.findAll('[0-9]+', 0) == []",
        "device.attributes['dra.example.com'].slot.find('[0-9]+') == '3'",
    ]);
    assert!(runtime_error("'abc'.find('(') == ''").starts_with("Illegal regex:"));
}

#[test]
fn url_library() {
    // kube's library/urls.go documentation.
    all_true(&[
        "isURL('https://example.com:80/path?query=val#fragment')",
        "isURL('/absolute-path')",
        "!isURL('relative/path')",
        "!isURL('')",
        "url('/absolute-path').getScheme() == ''",
        "url('https://example.com/').getScheme() == 'https'",
        "url('https://example.com:80/').getHost() == 'example.com:80'",
        "url('https://[::1]:80/').getHost() == '[::1]:80'",
        "url('https://example.com:80/').getHostname() == 'example.com'",
        "url('https://[::1]:80/').getHostname() == '::1'",
        "url('https://example.com:80/').getPort() == '80'",
        "url('https://example.com/').getPort() == ''",
        "url('https://example.com/path').getEscapedPath() == '/path'",
        "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
        "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
        "url('https://example.com/path').getQuery() == {}",
        "url(device.attributes['dra.example.com'].endpoint).getQuery()['zone'] == ['a', 'b']",
        "url(device.attributes['dra.example.com'].endpoint).getPort() == '8443'",
    ]);
    let m = runtime_error("url('relative/path').getScheme() == ''");
    assert_eq!(
        m,
        "URL parse error during conversion from string: parse \"relative/path\": invalid URI for request"
    );
    assert!(runtime_error("url('https://host:port/').getScheme() == ''").contains("invalid port \":port\" after host"));
}

#[test]
fn ip_library() {
    // kube's library/ip_test.go.
    all_true(&[
        "ip('192.168.0.1') == ip('192.168.0.1')",
        "isIP('192.168.0.1')",
        "!isIP('192.168.0.1.0')",
        "ip.isCanonical('127.0.0.1')",
        "ip('192.168.0.1').family() == 4",
        "ip('0.0.0.0').isUnspecified()",
        "!ip('127.0.0.1').isUnspecified()",
        "ip('127.0.0.1').isLoopback()",
        "!ip('1.2.3.4').isLoopback()",
        "ip('224.0.0.1').isLinkLocalMulticast()",
        "!ip('224.0.1.1').isLinkLocalMulticast()",
        "ip('169.254.169.254').isLinkLocalUnicast()",
        "!ip('192.168.0.1').isLinkLocalUnicast()",
        "ip('192.168.0.1').isGlobalUnicast()",
        "!ip('255.255.255.255').isGlobalUnicast()",
        "isIP('2001:db8::68')",
        "!isIP('2001:db8:::68')",
        "ip.isCanonical('2001:db8::68')",
        "!ip.isCanonical('2001:DB8::68')",
        "ip('2001:db8::68').family() == 6",
        "ip('::').isUnspecified()",
        "ip('::1').isLoopback()",
        "ip('ff02::1').isLinkLocalMulticast()",
        "!ip('fd00::1').isLinkLocalMulticast()",
        "ip('fe80::1').isLinkLocalUnicast()",
        "!ip('fd80::1').isLinkLocalUnicast()",
        "ip('2001:db8::abcd').isGlobalUnicast()",
        "!ip('ff00::1').isGlobalUnicast()",
        "string(ip('192.168.0.1')) == '192.168.0.1'",
        "type(ip('192.168.0.1')) == net.IP",
        "ip(device.attributes['dra.example.com'].ip).family() == 4",
    ]);
    assert_eq!(
        runtime_error("ip('192.168.0.1.0').family() == 4"),
        "IP Address \"192.168.0.1.0\" parse error during conversion from string: ParseAddr(\"192.168.0.1.0\"): IPv4 address too long"
    );
    assert_eq!(
        runtime_error("ip('fe80::1%eth0').family() == 6"),
        "IP address \"fe80::1%eth0\" with zone value is not allowed"
    );
    assert_eq!(
        runtime_error("ip('::ffff:1.2.3.4').family() == 6"),
        "IPv4-mapped IPv6 address \"::ffff:1.2.3.4\" is not allowed"
    );
}

#[test]
fn cidr_library() {
    // kube's library/cidr_test.go.
    all_true(&[
        "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
        "!cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
        "cidr('192.168.0.0/24').containsIP('192.168.0.1')",
        "!cidr('192.168.0.0/24').containsIP('192.168.1.1')",
        "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25'))",
        "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.1/32'))",
        "!cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/23'))",
        "!cidr('192.168.0.0/24').containsCIDR(cidr('192.169.0.1/32'))",
        "cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25')",
        "!cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')",
        "cidr('192.168.0.0/24').ip() == ip('192.168.0.0')",
        "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
        "cidr('192.168.0.0/24').prefixLength() == 24",
        "cidr('2001:db8::/32').containsIP(ip('2001:db8::1'))",
        "!cidr('2001:db8::/32').containsIP(ip('2001:dc8::1'))",
        "cidr('2001:db8::/32').containsCIDR('2001:db8::/33')",
        "!cidr('2001:db8::/32').containsCIDR('2001:db8::/31')",
        "cidr('2001:db8:1::/32').masked() == cidr('2001:db8::/32')",
        "cidr('2001:db8::/32').prefixLength() == 32",
        "string(cidr('192.168.0.0/24')) == '192.168.0.0/24'",
        "type(cidr('192.168.0.0/24')) == net.CIDR",
        "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33')",
        "cidr('10.0.0.0/16').containsIP(device.attributes['dra.example.com'].ip)",
    ]);
    assert_eq!(
        runtime_error("cidr('192.168.0.0/').prefixLength() == 0"),
        "network address parse error during conversion from string: network address parse error during conversion \
         from string: netip.ParsePrefix(\"192.168.0.0/\"): bad bits after slash: \"\""
    );
}

#[test]
fn format_library() {
    // kube's library/format_test.go.
    all_true(&[
        "format.dns1123Label().validate('my-label-name') == optional.none()",
        "format.dns1123Subdomain().validate('apiextensions.k8s.io') == optional.none()",
        "format.qualifiedName().validate('apiextensions.k8s.io/v1beta1') == optional.none()",
        "format.dns1123LabelPrefix().validate('my-label-prefix-') == optional.none()",
        "format.dns1123SubdomainPrefix().validate('mysubdomain.prefix.-') == optional.none()",
        "format.dns1035LabelPrefix().validate('my-label-prefix-') == optional.none()",
        "format.uri().validate('http://example.com') == optional.none()",
        "format.uuid().validate('123e4567-e89b-12d3-a456-426614174000') == optional.none()",
        "format.byte().validate('aGVsbG8=') == optional.none()",
        "format.date().validate('2021-01-01') == optional.none()",
        "format.datetime().validate('2021-01-01T00:00:00Z') == optional.none()",
        "format.labelValue().validate('') == optional.none()",
        "format.named('dns1123Label').hasValue()",
        "!format.named('unknown').hasValue()",
        "format.named('dns1123Label').value().validate('Bad_Label').hasValue()",
        "!format.dns1123Label().validate(device.attributes['dra.example.com'].slot).hasValue()",
        "format.date().validate('2021-02-29').hasValue()",
    ]);
    let cases = [
        (
            "format.dns1123Label().validate('contains a space')",
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and \
             end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        (
            "format.dns1035Label().validate('contains a space')",
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic \
             character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for \
             validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
        (
            "format.qualifiedName().validate('contains a space')",
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
             '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "format.dns1123Subdomain().validate('contains a space')",
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must \
             start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
    ];
    for (expr, message) in cases {
        let e = format!("{expr}.value() == [{message:?}]");
        assert_eq!(eval(&e), Ok(true), "{expr}");
    }
}

#[test]
fn cross_type_numeric_comparisons_and_optionals() {
    // kube's base environment: `CrossTypeNumericComparisons(true)`, `OptionalTypes()`.
    all_true(&[
        "1 < 1.5",
        "device.attributes['dra.example.com'].cores > 100.5",
        "device.attributes['dra.example.com'].?missing.orValue('none') == 'none'",
    ]);
}

/// A string of `n` × `chunk`, built within the expression (`lists.range` and `join`).
fn built(n: usize, chunk: &str) -> String {
    format!("lists.range({n}).map(i, '{chunk}').join()")
}

/// Whether the evaluation of `expr` spends the selectors' budget.
fn over_budget(expr: &str) -> bool {
    match eval(expr) {
        Err(CelError::Runtime(m)) if m == COST_EXCEEDED => true,
        Ok(_) => false,
        other => panic!("{expr}: {other:?}"),
    }
}

#[test]
fn regex_cost_is_kubes() {
    // kube: ⌈(1 + 100,000) × 0.1⌉ × ⌈400 × 0.25⌉ = 10,001 × 100 > 1,000,000; with a pattern of 200,
    // 10,001 × 50.
    let text = built(10_000, "aaaaaaaaaa");
    let long = format!("({})+b", "a".repeat(398));
    let short = format!("({})+b", "a".repeat(198));
    assert!(over_budget(&format!("cel.bind(s, {text}, s.find('{long}') == '')")));
    assert!(!over_budget(&format!("cel.bind(s, {text}, s.find('{short}') == '')")));
    assert!(over_budget(&format!("cel.bind(s, {text}, s.findAll('{long}') == [])")));
}

#[test]
fn split_and_join_cost_two_traversals() {
    // kube: `split` 2 × 10,000 × 0.1 = 2,000 per call: 600 calls are over the budget, 400 not.
    let text = built(1_000, "aaaaaaaaa,");
    let calls = |n: usize| format!("cel.bind(s, {text}, lists.range({n}).all(i, s.split(',').size() == 1001))");
    assert!(over_budget(&calls(600)));
    assert!(!over_budget(&calls(400)));
    let replaces = format!("cel.bind(s, {text}, lists.range(600).all(i, s.replace(',', ';').size() == 10000))");
    assert!(over_budget(&replaces));
}

#[test]
fn sort_distinct_and_range_cost_as_cel_go_tracks_them() {
    // cel-go's `trackListSelfCompare`: 2 × n², 2,000,000 for 1,000 elements, 500,000 for 500.
    assert!(over_budget("lists.range(1000).sort().size() == 1000"));
    assert!(!over_budget("lists.range(500).sort().size() == 500"));
    assert!(over_budget("lists.range(1000).distinct().size() == 1000"));
    assert!(over_budget("lists.range(1000).sortBy(i, -i).size() == 1000"));
    // `lists.range(n)` allocates n elements: charged before it does, and refused past cel-go's
    // 1,000,000.
    assert!(over_budget("lists.range(999999).size() > 0"));
    assert!(!over_budget("lists.range(900000).size() > 0"));
    assert_eq!(
        runtime_error("lists.range(2000000).size() > 0"),
        "lists.range: size 2000000 exceeds maximum allowed (1000000)"
    );
}

#[test]
fn sets_cost_is_the_product_of_the_sizes() {
    // cel-go's `trackSetsCost`: 1 + 1,000 × 1,001; 1 + 700 × 700.
    assert!(over_budget("sets.contains(lists.range(1000), lists.range(1001))"));
    assert!(!over_budget("sets.contains(lists.range(700), lists.range(700))"));
    assert!(over_budget("sets.equivalent(lists.range(710), lists.range(710))"));
}

#[test]
fn format_validate_costs_as_a_regex() {
    // kube: ⌈(1 + 10,000) × 0.1⌉ × ⌈30 × 0.25⌉ = 1,001 × 8 per call: 130 calls are over, 100 not.
    let text = built(1_000, "aaaaaaaaaa");
    let calls = |n: usize| {
        format!("cel.bind(s, {text}, lists.range({n}).all(i, format.dns1123Label().validate(s).hasValue()))")
    };
    assert!(over_budget(&calls(130)));
    assert!(!over_budget(&calls(100)));
}

#[test]
fn namespaces_are_not_variables() {
    // A comprehension variable named as a namespace is a variable.
    all_true(&["[[1]].all(sets, sets.size() == 1)", "sets.contains([1], [1])"]);
    match eval("sets == 1") {
        Err(CelError::Compile(m)) => assert!(m.contains("undeclared reference to 'sets'"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn lists_sets_and_comprehensions_as_cel_go_tests_them() {
    // cel-go ext/lists_test.go, sets_test.go and comprehensions_test.go: their expressions without
    // variables, as written there.
    all_true(&[
        r#"lists.range(4) == [0,1,2,3]"#,
        r#"[1,2,3,4].slice(0, 4) == [1,2,3,4]"#,
        r#"[1,2,[],[],[3,4]].flatten() == [1,2,3,4]"#,
        r#"["a", "c", "b", "first"].sortBy(e, e == "first" ? "" : e) == ["first", "a", "b", "c"]"#,
        r#"['c', 'a', 'a', 'b', 'a', 'b', 'c', 'c'].distinct() == ['c', 'a', 'b']"#,
        r#"lists.range(4) == [0, 1, 2, 3]"#,
        r#"[[1, 2], 3].flatten(1) == [1, 2, 3]"#,
        r#"[[1, 2], 3].flatten(3) == [1, 2, 3]"#,
        r#"[1, 2, 3].distinct() == [1, 2, 3]"#,
        r#"[1, 2, 3].slice(1, 3) == [2, 3]"#,
        r#"[2, 3, 1].sort() == [1, 2, 3]"#,
        r#"sets.contains([], [])"#,
        r#"sets.contains([1], [1, 1])"#,
        r#"sets.contains([1, 2, 3, 4], [2, 3])"#,
        r#"sets.contains([1, 2u], [2, 2.0])"#,
        r#"!sets.contains([1], [2])"#,
        r#"!sets.contains([1], [1.1, 1u])"#,
        r#"sets.equivalent([1], [1])"#,
        r#"sets.equivalent([1], [1u, 1.0])"#,
        r#"sets.equivalent([[1.0], [2, 3]], [[1], [2, 3.0]])"#,
        r#"!sets.equivalent([1, 2], [2u, 2, 2.0])"#,
        r#"sets.intersects([1], [1, 1])"#,
        r#"sets.intersects([1], [1, 2])"#,
        r#"sets.intersects([1, 2], [1u, 2, 2.3])"#,
        r#"!sets.intersects([1], [])"#,
        r#"[1, 2, 3, 4].all(i, v, i < 5 && v > 0)"#,
        r#"cel.bind(l, ['hello', 'world', 'hello!', 'worlds'], l.exists(i, v, v.startsWith('hello') && l[?(i+1)].optMap(next, next.endsWith('world')).orValue(false) ) )"#,
        r#"['Hello', 'world'].transformList(i, v, "[%d]%s".format([i, v.lowerAscii()])) == ["[0]hello", "[1]world"]"#,
        r#"['Hello', 'world'].transformMap(i, v, [v.lowerAscii()]) == {0: ['hello'], 1: ['world']}"#,
        r#"[1, 2, 3].transformMap(indexVar, valueVar, indexVar % 2 == 0, (indexVar * valueVar) + valueVar) == {0: 1, 2: 9}"#,
        r#"{'hello': 'world', 'hello!': 'world'}.all(k, v, k.startsWith('hello') && v == 'world')"#,
        r#"{'hello': 'world', 'hello!': 'worlds'}.exists_one(k, v, k.startsWith('hello') && v.endsWith('world'))"#,
        r#"{'hello': 'world'}.transformList(k, v, k.startsWith('greeting'), "%s=%s".format([k, v])) == []"#,
        r#"dyn({'hello': 'world', 'goodbye': 'cruel world'}).transformMap(k, v, "%s, %s!".format([k, v])) == {'hello': 'hello, world!', 'goodbye': 'goodbye, cruel world!'}"#,
        r#"{'hello': 'world', 'greetings': 'tacocat'}.transformMapEntry(k, v, v.reverse() == v, {k.reverse(): v.reverse()}) == {'sgniteerg': 'tacocat'}"#,
        r#"[].transformList(i, v, v) == []"#,
        r#"{}.transformMap(k, v, v + 1) == {}"#,
        r#"cel.bind(m, {"hello": "hello"}, m.transformMap(k, v, v + "world")) == {"hello": "helloworld"}"#,
        r#"{1: 2}.transformMapEntry(k, v, {v: k}) == {2: 1}"#,
        r#"[null, null, 'hello', string].all(i, v, i == 0 || type(v) != int)"#,
    ]);
    assert!(runtime_error("[0, 0u].transformMapEntry(i, v, {v: i}).size() == 1")
        .contains("insert failed: key 0 already exists"));
}

#[test]
fn string_format_as_cel_go_tests_its_version_1() {
    // cel-go ext/formatting_test.go (the formatter of strings versions 1 to 3, which kube's
    // version 2 has), its cases in the default locale without variables.
    all_true(&[
        r####""no substitution".format([]) == "no substitution""####,
        r####""str is %s and some more".format(["filler"]) == "str is filler and some more""####,
        r####""%% and also %%".format([]) == "% and also %""####,
        r####""%%%s%%".format(["text"]) == "%text%""####,
        r####""%s%%".format(["percent on the right"]) == "percent on the right%""####,
        r####""%%%s".format(["percent on the left"]) == "%percent on the left""####,
        r####""%d %d %d, %s %s %s, %d %d %d, %s %s %s".format([1, 2, 3, "A", "B", "C", 4, 5, 6, "D", "E", "F"]) == "1 2 3, A B C, 4 5 6, D E F""####,
        r####""%%escaped %s%%".format(["percent"]) == "%escaped percent%""####,
        r####""this is 5 in binary: %b".format([5]) == "this is 5 in binary: 101""####,
        r####""this is -5 in binary: %b".format([-5]) == "this is -5 in binary: -101""####,
        r####""unsigned 64 in binary: %b".format([uint(64)]) == "unsigned 64 in binary: 1000000""####,
        r####""bit set from bool: %b".format([true]) == "bit set from bool: 1""####,
        r####""%o".format([11]) == "13""####,
        r####""%o".format([-11]) == "-13""####,
        r####""this is an unsigned octal: %o".format([uint(65535)]) == "this is an unsigned octal: 177777""####,
        r####""%x is 30 in hexadecimal".format([30]) == "1e is 30 in hexadecimal""####,
        r####""%X is 20 in hexadecimal".format([30]) == "1E is 20 in hexadecimal""####,
        r####""%x is -30 in hexadecimal".format([-30]) == "-1e is -30 in hexadecimal""####,
        r####""%X is 6000 in hexadecimal".format([uint(6000)]) == "1770 is 6000 in hexadecimal""####,
        r####""%x".format(["Hello world!"]) == "48656c6c6f20776f726c6421""####,
        r####""%X".format(["Hello world!"]) == "48656C6C6F20776F726C6421""####,
        r####""%x".format([b"byte string"]) == "6279746520737472696e67""####,
        r####""%X".format([b"byte string"]) == "6279746520737472696E67""####,
        r####""%s".format([double("NaN")]) == "NaN""####,
        r####""%d".format([uint(64)]) == "64""####,
        r####""null: %s".format([null]) == "null: null""####,
        r####""%s".format([999999999999]) == "999999999999""####,
        r####""some bytes: %s".format([b"xyz"]) == "some bytes: xyz""####,
        r####""type is %s".format([type("test string")]) == "type is string""####,
        r####""true bool: %s, false bool: %s".format([true, false]) == "true bool: true, false bool: false""####,
    ]);
}

/// Expressions and what kube 1.37's selector environment makes of them on [`device`]: each
/// evaluated by `k8s.io/dynamic-resource-allocation/cel` v0.37.2 (`GetCompiler(...)
/// .CompileCELExpression(expr, Options{}).DeviceMatches`, the program in
/// `testdata/kube_answers.go.txt`), one per line: the expression, `OK` and the result, or `ERROR`
/// and kube's run-time error. Only expressions kube compiles are kept. The last ones build long
/// strings and lists to spend kube's budget of a selector, or come close to it.
const KUBE_ANSWERS: &str = include_str!("testdata/kube_answers.tsv");

#[test]
fn what_kube_answers() {
    let mut differ = Vec::new();
    let mut rows = 0;
    for line in KUBE_ANSWERS.lines().filter(|l| !l.trim().is_empty()) {
        let mut cols = line.split('\t');
        let (Some(expr), Some(kind), detail) = (cols.next(), cols.next(), cols.next().unwrap_or_default()) else {
            panic!("malformed row {line:?}");
        };
        rows += 1;
        let ours = eval(expr);
        let alike = match kind {
            "OK" => ours == Ok(detail == "true"),
            // kube's evaluation spent the selectors' budget: so must ours.
            _ if detail == COST_EXCEEDED => ours == Err(CelError::Runtime(COST_EXCEEDED.to_string())),
            // kube compiled it and its evaluation failed: so must ours, at run time.
            _ => matches!(ours, Err(ref e) if !matches!(e, CelError::Compile(_))),
        };
        if !alike {
            differ.push(format!("{expr}: kube {kind} {detail}, ours {ours:?}"));
        }
    }
    assert!(rows > 400, "{rows} rows");
    assert!(differ.is_empty(), "{differ:#?}");
}

#[test]
fn string_format_as_kubes_strings_version_writes_it() {
    // What cel-go v0.29.2's `ext.Strings(ext.StringsVersion(2))` (kube's) writes, each expression
    // evaluated there: grouped thousands and `∞` for `%f`, `× 10⁰³` for `%e`, CEL's syntax for
    // lists and maps, Go's `%g` for a double.
    all_true(&[
        r#"'%e'.format([1234.5]) == "1.234500\u202f×\u202f10⁰³""#,
        r#"'%e'.format([0.00012345]) == "1.234500\u202f×\u202f10⁻⁰⁴""#,
        r#"'%.2e'.format([1234.5]) == "1.234500\u202f×\u202f10⁰³""#,
        r#"'%e'.format([-1234.5]) == "-1.234500\u202f×\u202f10⁰³""#,
        r#"'%e'.format([0.0]) == "0.000000\u202f×\u202f10⁰⁰""#,
        r#"'%e'.format([1e100]) == "1.000000\u202f×\u202f10¹⁰⁰""#,
        r#"'%e'.format([double('nan')]) == "   NaN""#,
        r#"'%e'.format([double('inf')]) == "     ∞""#,
        r#"'%e'.format(['Infinity']) == "     ∞""#,
        r#"'%f'.format([-1234567.891]) == "-1,234,567.891000""#,
        r#"'%.0f'.format([2.5]) == "2""#,
        r#"'%.0f'.format([3.5]) == "4""#,
        r#"'%f'.format([1e21]) == "1,000,000,000,000,000,000,000.000000""#,
        r#"'%.3f'.format([double('nan')]) == "NaN""#,
        r#"'%f'.format([double('-inf')]) == "-∞""#,
        r#"'%f'.format(['NaN']) == "NaN""#,
        r#"'%f'.format([0.1]) == "0.100000""#,
        r#"'%.2f'.format([999.999]) == "1,000.00""#,
        r#"'%s'.format([1.5]) == "1.5""#,
        r#"'%s'.format([[1.5, 2]]) == "[1.500000, 2]""#,
        r#"'%s'.format([{'b': 1, 'a': [1.0], 'c': {'x': b'y'}}]) == "{\"a\":[1.000000], \"b\":1, \"c\":{\"x\":b\"y\"}}""#,
        r#"'%s'.format([[null, true, 'a"b', b'x\x00']]) == "[null, true, \"a\\\"b\", b\"x\\x00\"]""#,
        r#"'%s'.format([{1: 'a', 2u: 'b', true: 'c', 'k': 'd'}]) == "{\"k\":\"d\", 1:\"a\", 2:\"b\", true:\"c\"}""#,
        r#"'%s'.format([[double('inf'), double('nan')]]) == "[\"+Inf\", \"NaN\"]""#,
        r#"'%s'.format([double('inf')]) == "+Inf""#,
        r#"'%s'.format([1e100]) == "1e+100""#,
        r#"'%b'.format([5]) == "101""#,
        r#"'%b'.format([true]) == "1""#,
        r#"'%o'.format([-11]) == "-13""#,
        r#"'%x'.format(['Hello']) == "48656c6c6f""#,
        r#"'%X'.format([b'\x00\xff']) == "00FF""#,
        r#"'%x'.format([-30]) == "-1e""#,
        r#"'%.3s'.format(['abcdef']) == "abcdef""#,
        r#"'%.3d'.format([5]) == "5""#,
        r#"'no args'.format([1, 2]) == "no args""#,
        r#"'%s'.format([{'a': 1}.a]) == "1""#,
        r#"'%e'.format([123456789.0]) == "1.234568\u202f×\u202f10⁰⁸""#,
        r#"'%f'.format([123.0]) == "123.000000""#,
        r#"'%f'.format([-0.0]) == "0.000000""#,
        r#"'%s'.format([-0.0]) == "-0""#,
        r#"'%s'.format([[-0.0, 0.000001, 1e21]]) == "[-0.000000, 0.000001, 1000000000000000000000.000000]""#,
    ]);
    for (expr, message) in [
        (
            r#"'%f'.format([1])"#,
            r#"error during formatting: fixed-point clause can only be used on doubles, was given int"#,
        ),
        (
            r#"'%d'.format([1.5])"#,
            r#"error during formatting: decimal clause can only be used on integers, was given double"#,
        ),
        (
            r#"'%x'.format([1.5])"#,
            r#"error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given double"#,
        ),
        (r#"'%s %s'.format(['a'])"#, r#"index 1 out of range"#),
        (r#"'%'.format(['a'])"#, r#"unexpected end of string"#),
        (
            r#"'%.'.format(['a'])"#,
            r#"could not parse formatting clause: error while parsing precision: could not find end of precision specifier"#,
        ),
        (
            r#"'%.f'.format([1.5])"#,
            r#"could not parse formatting clause: error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing "": invalid syntax"#,
        ),
        (
            r#"'%z'.format([1])"#,
            r#"could not parse formatting clause: unrecognized formatting clause "z""#,
        ),
    ] {
        assert_eq!(runtime_error(&format!("{expr} == ''")), message, "{expr}");
    }
}
