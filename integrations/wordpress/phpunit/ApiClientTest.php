<?php
/**
 * Compresso_Api_Client::multipart_body: RFC 7578 bodies.
 *
 * @package Compresso
 */

use PHPUnit\Framework\TestCase;

final class ApiClientTest extends TestCase {

	public function test_fields_then_the_file_byte_for_byte() {
		$bytes = "\xFF\xD8\xFF\x00\r\n--b\r\n\xFF\xD9";
		$body  = Compresso_Api_Client::multipart_body( 'XyZ', array( 'quality' => '75', 'format' => 'webp' ), 'file', 'dune.jpg', 'image/jpeg', $bytes );
		$this->assertSame(
			"--XyZ\r\nContent-Disposition: form-data; name=\"quality\"\r\n\r\n75\r\n"
			. "--XyZ\r\nContent-Disposition: form-data; name=\"format\"\r\n\r\nwebp\r\n"
			. "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dune.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
			. $bytes . "\r\n--XyZ--\r\n",
			$body
		);
	}

	public function test_a_file_name_cannot_break_out_of_its_header() {
		$body = Compresso_Api_Client::multipart_body( 'b', array(), 'file', "/tmp/x\"; name=\"evil\r\nX-Injected: 1.jpg", 'image/jpeg', 'x' );
		$this->assertStringContainsString( 'filename="x%22; name=%22evil%0D%0AX-Injected: 1.jpg"', $body );
		// As many line breaks as a body for a plain name: none came from the file name.
		$this->assertSame( 6, substr_count( $body, "\r\n" ) );
		$this->assertStringNotContainsString( '/tmp/', $body );
	}

	public function test_no_fields() {
		$this->assertSame(
			"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\nPNG\r\n--b--\r\n",
			Compresso_Api_Client::multipart_body( 'b', array(), 'file', 'a.png', 'image/png', 'PNG' )
		);
	}
}
