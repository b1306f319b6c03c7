<?php
/**
 * Compresso_Rewrite: the Apache rules, the nginx snippet and the .htaccess block.
 *
 * @package Compresso
 */

use PHPUnit\Framework\TestCase;

final class RewriteTest extends TestCase {

	public function test_apache_rules_serve_each_sibling_when_accepted_and_present_avif_first() {
		$rules = implode( "\n", Compresso_Rewrite::apache_rules( array( 'webp', 'avif' ) ) );
		$avif  = "\tRewriteCond %{HTTP_ACCEPT} image/avif\n\tRewriteCond %{REQUEST_FILENAME}.avif -f\n\tRewriteRule ^(.+\\.(?:jpe?g|png|gif))$ $1.avif [NC,T=image/avif,L]";
		$webp  = "\tRewriteCond %{HTTP_ACCEPT} image/webp\n\tRewriteCond %{REQUEST_FILENAME}.webp -f\n\tRewriteRule ^(.+\\.(?:jpe?g|png|gif))$ $1.webp [NC,T=image/webp,L]";
		$this->assertStringContainsString( $avif, $rules );
		$this->assertStringContainsString( $webp, $rules );
		$this->assertLessThan( strpos( $rules, $webp ), strpos( $rules, $avif ) );
		$this->assertStringContainsString( "AddType image/avif .avif\n\tAddType image/webp .webp", $rules );
		// Vary on the original whether rewritten or not (and on the file matched after the rewrite).
		$this->assertStringContainsString( "<FilesMatch \"(?i)\\.(jpe?g|png|gif)(\\.(avif|webp))?$\">\n\t\tHeader merge Vary Accept\n\t</FilesMatch>", $rules );
		$this->assertSame( 1, substr_count( $rules, 'RewriteEngine On' ) );
		// Every directive guarded, so a server without a module does not answer 500.
		$this->assertSame( 3, substr_count( $rules, '<IfModule ' ) );
		$this->assertSame( 3, substr_count( $rules, '</IfModule>' ) );
	}

	public function test_apache_rules_only_for_the_formats_made() {
		$rules = implode( "\n", Compresso_Rewrite::apache_rules( array( 'webp' ) ) );
		$this->assertStringContainsString( '$1.webp', $rules );
		$this->assertStringNotContainsString( 'avif', $rules );
		$this->assertSame( array(), Compresso_Rewrite::apache_rules( array() ) );
		$this->assertSame( array(), Compresso_Rewrite::apache_rules( array( 'jxl' ) ) );
	}

	public function test_nginx_snippet_prefers_avif_falls_back_to_webp_then_the_original() {
		$snippet = Compresso_Rewrite::nginx_snippet( '/wp-content/uploads/', array( 'webp', 'avif' ) );
		$this->assertStringContainsString( "map \$http_accept \$compresso_suffix {\n    default \"\";\n    \"~*image/avif\" \".avif\";\n    \"~*image/webp\" \".webp\";\n}", $snippet );
		$this->assertStringContainsString( "map \$http_accept \$compresso_webp {\n    default \"\";\n    \"~*image/webp\" \".webp\";\n}", $snippet );
		$this->assertStringContainsString( "location ~* ^/wp-content/uploads/.+\\.(?:jpe?g|png|gif)$ {\n    add_header Vary Accept;\n    try_files \$uri\$compresso_suffix \$uri\$compresso_webp \$uri =404;\n}", $snippet );
	}

	public function test_nginx_snippet_with_one_format_and_a_subdirectory_site() {
		$snippet = Compresso_Rewrite::nginx_snippet( 'blog/wp-content/uploads', array( 'webp' ) );
		$this->assertStringContainsString( 'location ~* ^/blog/wp-content/uploads/.+', $snippet );
		$this->assertStringContainsString( 'try_files $uri$compresso_suffix $uri =404;', $snippet );
		$this->assertStringNotContainsString( 'avif"', $snippet );
		$this->assertStringNotContainsString( '$compresso_webp', $snippet );
		$this->assertSame( '', Compresso_Rewrite::nginx_snippet( '/wp-content/uploads', array() ) );
	}

	public function test_block_is_added_replaced_and_removed_leaving_the_rest_byte_for_byte() {
		$theirs = "# Another plugin\r\nOptions -Indexes\r\n";
		$first  = Compresso_Rewrite::with_block( $theirs, array( 'A', 'B' ) );
		$this->assertSame( "# BEGIN Compresso\nA\nB\n# END Compresso\n\n" . $theirs, $first );
		$again = Compresso_Rewrite::with_block( $first, array( 'A', 'B' ) );
		$this->assertSame( $first, $again );
		$other = Compresso_Rewrite::with_block( $first, array( 'C' ) );
		$this->assertSame( "# BEGIN Compresso\nC\n# END Compresso\n\n" . $theirs, $other );
		$this->assertSame( $theirs, Compresso_Rewrite::with_block( $other, array() ) );
		$this->assertSame( '', Compresso_Rewrite::with_block( Compresso_Rewrite::with_block( '', array( 'A' ) ), array() ) );
		$this->assertSame( $theirs, Compresso_Rewrite::with_block( $theirs, array() ) );
	}

	public function test_a_block_in_the_middle_of_the_file_is_replaced_and_only_it() {
		$text = "# BEGIN WordPress\nX\n# END WordPress\n# BEGIN Compresso\nold\n# END Compresso\n# BEGIN Other\nY\n# END Other\n";
		$new  = Compresso_Rewrite::with_block( $text, array( 'new' ) );
		$this->assertSame( 1, substr_count( $new, '# BEGIN Compresso' ) );
		$this->assertStringNotContainsString( 'old', $new );
		$this->assertStringContainsString( "# BEGIN WordPress\nX\n# END WordPress\n# BEGIN Other\nY\n# END Other\n", $new );
		$this->assertSame( "# BEGIN WordPress\nX\n# END WordPress\n# BEGIN Other\nY\n# END Other\n", Compresso_Rewrite::with_block( $new, array() ) );
	}

	public function test_formats_of_settings() {
		$this->assertSame( array( 'avif', 'webp' ), Compresso_Rewrite::formats_of( array( 'webp' => true, 'avif' => true ) ) );
		$this->assertSame( array( 'webp' ), Compresso_Rewrite::formats_of( array( 'webp' => true, 'avif' => false ) ) );
		$this->assertSame( array(), Compresso_Rewrite::formats_of( array() ) );
	}
}
