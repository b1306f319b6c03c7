<?php
/**
 * Compresso_Delivery: the <picture> markup and where it is used.
 *
 * @package Compresso
 */

use PHPUnit\Framework\TestCase;

final class DeliveryTest extends TestCase {

	const IMG = '<img width="1024" height="640" src="https://example.com/u/dune-1024x640.jpg" class="wp-image-7 alignwide" style="border-radius:4px" alt="Dunes &amp; sky" srcset="https://example.com/u/dune-1024x640.jpg 1024w, https://example.com/u/dune-300x188.jpg 300w, https://example.com/u/dune.jpg 1680w" sizes="(max-width: 1024px) 100vw, 1024px" loading="lazy" data-builder=\'{"x":1}\' />';

	public function test_picture_wraps_the_img_unchanged_with_one_source_per_format_avif_first() {
		$all  = static function ( $url, $format ) {
			return true;
		};
		$html = Compresso_Delivery::picture( self::IMG, array( 'webp', 'avif' ), $all );
		$this->assertSame(
			'<picture class="compresso-picture">'
			. '<source type="image/avif" srcset="https://example.com/u/dune-1024x640.jpg.avif 1024w, https://example.com/u/dune-300x188.jpg.avif 300w, https://example.com/u/dune.jpg.avif 1680w" sizes="(max-width: 1024px) 100vw, 1024px">'
			. '<source type="image/webp" srcset="https://example.com/u/dune-1024x640.jpg.webp 1024w, https://example.com/u/dune-300x188.jpg.webp 300w, https://example.com/u/dune.jpg.webp 1680w" sizes="(max-width: 1024px) 100vw, 1024px">'
			. self::IMG . '</picture>',
			$html
		);
	}

	public function test_a_width_without_a_smaller_copy_keeps_its_own_url() {
		$some = static function ( $url, $format ) {
			return 'webp' === $format && false === strpos( $url, '300x188' );
		};
		$html = Compresso_Delivery::picture( self::IMG, array( 'webp', 'avif' ), $some );
		$this->assertStringContainsString( 'srcset="https://example.com/u/dune-1024x640.jpg.webp 1024w, https://example.com/u/dune-300x188.jpg 300w, https://example.com/u/dune.jpg.webp 1680w"', $html );
		$this->assertStringNotContainsString( 'image/avif', $html );
	}

	public function test_an_img_without_srcset_or_sizes() {
		$img  = "<img src='https://example.com/u/logo.png' class='custom-logo'>";
		$html = Compresso_Delivery::picture(
			$img,
			array( 'webp' ),
			static function () {
				return true;
			}
		);
		$this->assertSame( '<picture class="compresso-picture"><source type="image/webp" srcset="https://example.com/u/logo.png.webp">' . $img . '</picture>', $html );
	}

	public function test_nothing_changes_without_copies_formats_or_an_img() {
		$none = static function () {
			return false;
		};
		$all  = static function () {
			return true;
		};
		$this->assertSame( self::IMG, Compresso_Delivery::picture( self::IMG, array( 'webp', 'avif' ), $none ) );
		$this->assertSame( self::IMG, Compresso_Delivery::picture( self::IMG, array(), $all ) );
		$this->assertSame( '<iframe src="x"></iframe>', Compresso_Delivery::picture( '<iframe src="x"></iframe>', array( 'webp' ), $all ) );
		$this->assertSame( '<img alt="no source">', Compresso_Delivery::picture( '<img alt="no source">', array( 'webp' ), $all ) );
	}

	public function test_urls_are_decoded_then_escaped() {
		$img  = '<img src="https://example.com/u/a&amp;b.jpg" srcset="https://example.com/u/a&amp;b.jpg 100w">';
		$seen = array();
		$html = Compresso_Delivery::picture(
			$img,
			array( 'webp' ),
			static function ( $url ) use ( &$seen ) {
				$seen[] = $url;
				return true;
			}
		);
		$this->assertSame( array( 'https://example.com/u/a&b.jpg' ), $seen );
		$this->assertStringContainsString( 'srcset="https://example.com/u/a&amp;b.jpg.webp 100w"', $html );
	}

	public function test_picture_only_in_picture_delivery_and_per_context() {
		$on = array( 'delivery' => 'picture', 'picture_content' => true, 'picture_attachment' => true );
		$this->assertTrue( Compresso_Delivery::picture_on( $on, 'content:the_content' ) );
		$this->assertTrue( Compresso_Delivery::picture_on( $on, 'attachment' ) );
		$this->assertFalse( Compresso_Delivery::picture_on( array_merge( $on, array( 'delivery' => 'rewrite' ) ), 'content:the_content' ) );
		$this->assertFalse( Compresso_Delivery::picture_on( array_merge( $on, array( 'delivery' => 'off' ) ), 'attachment' ) );
		$no_content = array_merge( $on, array( 'picture_content' => false ) );
		$this->assertFalse( Compresso_Delivery::picture_on( $no_content, 'content:widget_block_content' ) );
		$this->assertTrue( Compresso_Delivery::picture_on( $no_content, 'attachment' ) );
		$no_theme = array_merge( $on, array( 'picture_attachment' => false ) );
		$this->assertTrue( Compresso_Delivery::picture_on( $no_theme, 'content:the_content' ) );
		$this->assertFalse( Compresso_Delivery::picture_on( $no_theme, 'attachment' ) );
		// Settings saved before delivery existed: <picture> everywhere, as before.
		$this->assertTrue( Compresso_Delivery::picture_on( array(), 'content:the_content' ) );
	}
}
